// `npm test`'s first step: type-checks the project (tsconfig.test.json: src, test,
// bench, scripts — what `npm run typecheck` checks) and emits src/ and test/ as
// JavaScript to .test-build/, in the same tree, so that `node --test` runs the
// compiled tests without a loader (test/harness/test-build.ts says why). Also copies
// the files the compiled code reads beside itself: the Lua scripts, the tests' .mjs
// preloads, storage/redis.conf and package.json (read as ../../ from src/). The folder
// is removed first: a test file deleted from test/ must not run on from an old build.
// Last, it writes the groups of small test files that share a process
// (`.test-build/test/<dir>/_group-N.test.js`) and the plan test-order.mjs reads
// (scripts/test-plan.mjs says which files and why).
// Run from the repository root, as npm runs it.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { groupSource, planGroups, PLAN_FILE, ROOT } from './test-plan.mjs';

const OUT = '.test-build';

rmSync(OUT, { recursive: true, force: true });
// The package's own tsc (node_modules/.bin/tsc, as npm scripts find it).
const run = spawnSync('node_modules/.bin/tsc', ['-p', 'tsconfig.test.json'], { stdio: 'inherit' });
if (run.error) throw run.error;
if (run.status !== 0) process.exit(run.status ?? 1);

/** Copies `from` to `OUT/from`, directories' files whose names end with `ext` only. */
function copyAssets(from, ext) {
  cpSync(from, `${OUT}/${from}`, { recursive: true, filter: (f) => !/\.[a-z]+$/i.test(f) || f.endsWith(ext) });
}
copyAssets('src', '.lua');
copyAssets('test', '.mjs');
mkdirSync(`${OUT}/storage`, { recursive: true });
cpSync('storage/redis.conf', `${OUT}/storage/redis.conf`);
cpSync('package.json', `${OUT}/package.json`);

const compiled = readdirSync(ROOT, { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .flatMap((d) => readdirSync(`${ROOT}/${d.name}`).filter((f) => f.endsWith('.test.js')).map((f) => `${ROOT}/${d.name}/${f}`))
  .sort();
const plan = planGroups(compiled);
for (const group of plan.groups) writeFileSync(group.file, groupSource(group));
writeFileSync(PLAN_FILE, JSON.stringify(plan, null, 1) + '\n');
