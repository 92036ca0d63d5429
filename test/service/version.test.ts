/**
 * Telling builds apart (src/version.ts; README, "Upgrades"): `pixiu --version` prints
 * the package's version and the git commit of the build, the `pixiu listening` line
 * carries both, and the data dir's LAYOUT names the build that wrote it. The commit is
 * captured when `npm run build` runs (scripts/build-info.mjs writes
 * dist/build-info.json), read from git when run from the sources, and `unknown`
 * outside a git checkout.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT, cliEntry, spawnServe } from '../harness/pixiu-server.js';
import { runCliOnce } from '../harness/cli-process.js';
import { embeddedDataDir } from '../harness/embedded-data-dir.js';

const run = promisify(execFile);
const pkg = JSON.parse(await readFile(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
/** What --version prints: the version, and a short hash (`-dirty` when the tree had changes) or `unknown`. */
const VERSION_LINE = /^(\d+\.\d+\.\d+\S*) \(([0-9a-f]{7,40}(?:-dirty)?|unknown)\)$/;

test('pixiu --version prints the package version and the commit of the checkout; -V too', async () => {
  const head = (await run('git', ['-C', REPO_ROOT, 'rev-parse', 'HEAD'])).stdout.trim();
  for (const flag of ['--version', '-V']) {
    const answer = await runCliOnce([flag]);
    assert.equal(answer.code, 0, answer.stderr);
    const [, version, commit] = VERSION_LINE.exec(answer.stdout.trim()) ?? [];
    assert.equal(version, pkg.version, answer.stdout);
    // From the sources the commit is HEAD's; a build names the commit it was built from, which a later one without changes to src/ may have moved past.
    if (cliEntry().includes('--import')) assert.ok(head.startsWith(String(commit).replace(/-dirty$/, '')), `${answer.stdout} is HEAD ${head}`);
    else assert.notEqual(commit, undefined, answer.stdout);
  }
});

test('the pixiu listening line names the version and commit --version prints, and the LAYOUT the build that wrote it', { timeout: 60_000 }, async (t) => {
  const printed = (await runCliOnce(['--version'])).stdout.trim();
  const { dataDir, env } = await embeddedDataDir(t, 'pixiu-version-');
  const serve = await spawnServe(env, t);
  const line = serve.stdout().split('\n').find((l) => l.includes('"pixiu listening"'));
  const entry = JSON.parse(String(line)) as { version?: unknown; commit?: unknown };
  assert.equal(`${String(entry.version)} (${String(entry.commit)})`, printed, String(line));
  assert.deepEqual(await serve.term(), { code: 0, signal: null }, serve.stderr());
  const layout = JSON.parse(await readFile(path.join(dataDir, 'xiu', 'LAYOUT'), 'utf8')) as { writtenBy?: unknown; format?: unknown };
  assert.equal(layout.writtenBy, printed);
  assert.equal(layout.format, 1);
});

/** A package root of its own: package.json, scripts/build-info.mjs and src/version.ts as dist/version.ts (tsx runs it for the compiled one). */
async function packageCopy(t: TestContext): Promise<string> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'pixiu-build-info-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  await mkdir(path.join(root, 'scripts'));
  await mkdir(path.join(root, 'dist'));
  await copyFile(path.join(REPO_ROOT, 'scripts', 'build-info.mjs'), path.join(root, 'scripts', 'build-info.mjs'));
  await copyFile(path.join(REPO_ROOT, 'src', 'version.ts'), path.join(root, 'dist', 'version.ts'));
  await writeFile(path.join(root, 'package.json'), '{"name":"pixiu","version":"9.8.7","type":"module"}\n');
  return root;
}

const TSX = ['--import', import.meta.resolve('tsx')];
const PRINT_VERSION = "import('./dist/version.js').then((m) => console.log(m.versionLine()))";

/** `versionLine()` of the copy's dist/, run there. */
async function versionIn(root: string): Promise<string> {
  return (await run(process.execPath, [...TSX, '-e', PRINT_VERSION], { cwd: root })).stdout.trim();
}

test('the build records its commit in dist/build-info.json: named after .git is gone; with no .git and no record, unknown; a changed tracked file is -dirty', async (t) => {
  const root = await packageCopy(t);
  assert.equal(await versionIn(root), '9.8.7 (unknown)', 'no git checkout, no build record');

  const git = (...args: string[]): Promise<{ stdout: string }> => run('git', ['-C', root, '-c', 'user.name=t', '-c', 'user.email=t@example.com', '-c', 'commit.gpgsign=false', '-c', 'core.hooksPath=/dev/null', ...args]);
  await git('init', '-q');
  await git('add', '.');
  await git('commit', '-q', '-m', 'build me');
  const hash = (await git('rev-parse', '--short', 'HEAD')).stdout.trim();
  assert.equal(await versionIn(root), `9.8.7 (${hash})`, 'read from git when not built');
  await writeFile(path.join(root, 'package.json'), '{"name":"pixiu","version":"9.8.7","type":"module" }\n');
  assert.equal(await versionIn(root), `9.8.7 (${hash}-dirty)`, 'a tracked file changed');
  await git('checkout', '--', 'package.json');

  await run(process.execPath, [...TSX, 'scripts/build-info.mjs'], { cwd: root });
  assert.deepEqual(JSON.parse(await readFile(path.join(root, 'dist', 'build-info.json'), 'utf8')), { commit: hash });
  await rm(path.join(root, '.git'), { recursive: true });
  assert.equal(await versionIn(root), `9.8.7 (${hash})`, 'the commit the build was made from, without .git');

  await run(process.execPath, [...TSX, 'scripts/build-info.mjs'], { cwd: root });
  assert.deepEqual(JSON.parse(await readFile(path.join(root, 'dist', 'build-info.json'), 'utf8')), { commit: 'unknown' }, 'built outside a checkout');
});
