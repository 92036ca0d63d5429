// npm's `prepare` (run by `npm ci` and `npm install`): builds dist/ with `npm run build`
// when TypeScript is installed. Without it — `npm ci --omit=dev`, a production install
// — it builds nothing and exits 0 with one line saying so: dist/ is then the one built
// before (in this tree, or copied in from a build stage), and the install must not
// fail for want of a compiler it is told to leave out (docs/decisions.md, "Running in
// production"). Run from the package root, as npm runs it.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';

/** Whether the `typescript` package (tsc) resolves from the package root. */
function typescriptInstalled() {
  try {
    createRequire(`${process.cwd()}/package.json`).resolve('typescript/package.json');
    return true;
  } catch {
    return false;
  }
}

if (typescriptInstalled()) {
  // npm_execpath is the npm that runs this script; the bare name is for a run by hand.
  const npm = process.env.npm_execpath;
  const run = npm ? spawnSync(process.execPath, [npm, 'run', 'build'], { stdio: 'inherit' }) : spawnSync('npm', ['run', 'build'], { stdio: 'inherit', shell: process.platform === 'win32' });
  if (run.error) throw run.error;
  process.exit(run.status ?? 1);
}
const built = existsSync('dist/cli/main.js');
console.error(built
  ? 'pixiu: TypeScript is not installed (dev dependencies left out), so the build is skipped: dist/ as built before is what runs'
  : 'pixiu: TypeScript is not installed (dev dependencies left out) and dist/ is not built: build it where dev dependencies are installed (npm ci && npm run build), then copy dist/ here or prune with npm prune --omit=dev');
