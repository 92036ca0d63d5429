/**
 * The group files `npm test` runs small test files in (scripts/test-plan.mjs
 * `groupSource`, written by scripts/build-tests.mjs), run by a `node --test` of their
 * own on throwaway members: each member's tests under a suite named after its source,
 * and a member that throws as it is imported counted in the summary's `# fail` with exit
 * code 1. Before, such a member failed only its suite, which node:test 20 counts under
 * `# suites`: the run failed with `# fail 0` in its summary.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT } from './test-build.js';

/** What the tests use of scripts/test-plan.mjs (plain JavaScript, imported by path). */
interface TestPlan {
  readonly ROOT: string;
  groupSource(group: { members: readonly string[] }): string;
}

const plan = await import(pathToFileURL(path.join(REPO_ROOT, 'scripts/test-plan.mjs')).href) as TestPlan;

/** Throwaway members by name (`<name>.test.js`): their JavaScript. */
const MEMBERS: Record<string, string> = {
  passes: "import { test } from 'node:test';\ntest('one', () => {});\ntest('two', () => {});\n",
  'also-passes': "import { test } from 'node:test';\ntest('three', () => {});\n",
  throws: "throw new Error('a member that throws as it is imported');\n",
};

/**
 * Writes the `members` (names of {@link MEMBERS}) and a group of them as build-tests.mjs
 * would, under `<tmp>/<plan.ROOT>/demo/`, and runs the group with `node --test` (TAP).
 * @returns the exit code and the TAP output
 */
async function runGroup(t: TestContext, members: readonly string[]): Promise<{ code: number | null; tap: string }> {
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'pixiu-groups-'));
  t.after(() => rm(tmp, { recursive: true, force: true }));
  // As .test-build/package.json (copied by the build): the compiled files are ES modules.
  await writeFile(path.join(tmp, 'package.json'), '{"type":"module"}\n');
  const dir = path.join(tmp, plan.ROOT, 'demo');
  await mkdir(dir, { recursive: true });
  for (const name of members) await writeFile(path.join(dir, `${name}.test.js`), MEMBERS[name] as string);
  const source = plan.groupSource({ members: members.map((name) => `${plan.ROOT}/demo/${name}.test.js`) });
  await writeFile(path.join(dir, '_group-1.test.js'), source);
  // Without the runner's NODE_TEST_CONTEXT, which would make the child report to this process's runner.
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT;
  const child = spawn(process.execPath, ['--test', '--test-reporter=tap', path.join(dir, '_group-1.test.js')], { cwd: tmp, env, stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => child.kill('SIGKILL'));
  let tap = '';
  child.stdout.on('data', (c: Buffer) => { tap += c.toString(); });
  child.stderr.on('data', (c: Buffer) => { tap += c.toString(); });
  const [code] = await once(child, 'close') as [number | null];
  return { code, tap };
}

/** The summary's count `# <what> N`. */
function summary(tap: string, what: string): number | undefined {
  const m = new RegExp(`^# ${what} (\\d+)$`, 'm').exec(tap);
  return m ? Number(m[1]) : undefined;
}

test('a group runs each member\'s tests under a suite named after its source, and passes with every test counted', async (t) => {
  const { code, tap } = await runGroup(t, ['also-passes', 'passes']);
  assert.equal(code, 0, tap);
  assert.deepEqual(['tests', 'suites', 'pass', 'fail'].map((w) => summary(tap, w)), [3, 2, 3, 0], tap);
  assert.match(tap, /^ok 1 - test\/demo\/also-passes\.test\.ts$/m);
  assert.match(tap, /^ok 2 - test\/demo\/passes\.test\.ts$/m);
  assert.match(tap, /^ {4}ok 1 - one$/m);
  assert.doesNotMatch(tap, /\(import\)/);
});

test('a member that throws as it is imported is a failed test, counted in # fail, with its error; the run exits 1 and the others still run', async (t) => {
  const { code, tap } = await runGroup(t, ['passes', 'throws']);
  assert.equal(code, 1, tap);
  assert.deepEqual(['tests', 'pass', 'fail'].map((w) => summary(tap, w)), [3, 2, 1], tap);
  assert.match(tap, /^ {4}not ok 1 - test\/demo\/throws\.test\.ts \(import\)$/m);
  assert.match(tap, /^not ok 2 - test\/demo\/throws\.test\.ts$/m);
  assert.match(tap, /error: 'a member that throws as it is imported'/);
  assert.match(tap, /^ok 1 - test\/demo\/passes\.test\.ts$/m);
});
