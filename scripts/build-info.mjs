// `npm run build`'s last step: records the git commit the build is made from in
// dist/build-info.json (`{"commit": "c01b527"}`; `-dirty` when tracked files differ
// from it; `unknown` outside a git checkout), which `pixiu --version`, the `pixiu
// listening` log line and the data dir's LAYOUT name (src/version.ts). Uses the
// compiled src/version.ts, so the build and a run from the sources agree. Run from the
// package root, as npm runs it, after tsc.
import { writeFileSync } from 'node:fs';

const { sourceCommit } = await import(new URL('../dist/version.js', import.meta.url).href);
writeFileSync('dist/build-info.json', `${JSON.stringify({ commit: sourceCommit(process.cwd()) })}\n`);
