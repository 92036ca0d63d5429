/**
 * What `pixiu serve` creates under the data dir is private to its user
 * (src/files/private-data.ts; docs/decisions.md, "The data dir is private to the
 * service's user"): a security tester read the cluster secret in the embedded Redis's
 * AOF and message bodies in the store's LevelDB files as user `nobody` (0644 files in
 * 0755 folders under umask 022). Folders that exist already are left as they are, with
 * a warn line when other users can reach them.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { chmod, chown, lstat, mkdir, mkdtemp, readFile, readdir, realpath, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PixiuClient, runCli, spawnServe, type CleanupContext } from '../harness/pixiu-server.js';
import { ROOT_ON_OTHERS_DATA_DIR_LOG } from '../../src/files/private-data.js';
import { logLines } from '../harness/log-capture.js';
import { killRedisOnCleanup } from '../harness/embedded-data-dir.js';
import { waitUntil } from '../harness/checks.js';

const WARN = 'data dir folders other users of this machine can read';

/**
 * A temp folder (mode 0755, so that only the data dir's own modes decide) whose
 * `data` is the data dir, not made yet; `t`'s clean-up kills its embedded
 * redis-server by its pid file, then removes the folder. Runs the test under umask
 * 022, a stock system's, which the spawned serves inherit.
 */
async function dataDirIn(t: CleanupContext): Promise<{ dataDir: string; env: Record<string, string> }> {
  const root = await realpath(await mkdtemp(path.join(os.tmpdir(), 'pixiu-modes-')));
  await chmod(root, 0o755);
  const dataDir = path.join(root, 'data');
  const umask = process.umask(0o022);
  t.after(() => { process.umask(umask); });
  killRedisOnCleanup(t, dataDir);
  t.after(() => rm(root, { recursive: true, force: true }));
  return { dataDir, env: { PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0', PIXIU_LOG_LEVEL: 'info' } };
}

/** Permission bits of `file` (not following a link). */
async function modeOf(file: string): Promise<number> {
  return (await lstat(file)).mode & 0o777;
}

/** Every path under `dir` (itself included) whose mode has a bit for group or others, with its mode in octal. */
async function openEntries(dir: string): Promise<string[]> {
  const found: string[] = [];
  const mode = await modeOf(dir);
  if ((mode & 0o077) !== 0) found.push(`${dir} ${mode.toString(8)}`);
  if ((await lstat(dir)).isDirectory()) {
    for (const name of await readdir(dir)) found.push(...await openEntries(path.join(dir, name)));
  }
  return found;
}

/** The file under `<dataDir>/redis/appendonly` that holds the cluster secret's key; undefined: none yet. */
async function aofWithClusterSecret(dataDir: string): Promise<string | undefined> {
  const dir = path.join(dataDir, 'redis', 'appendonly');
  for (const name of await readdir(dir).catch(() => [])) {
    if ((await readFile(path.join(dir, name), 'latin1')).includes('px:cluster:secret')) return path.join(dir, name);
  }
  return undefined;
}

/** The warn lines about open data folders in a serve's log, parsed. */
function openFolderWarns(stdout: string): Array<{ folders: string[] }> {
  return stdout.split('\n').filter((line) => line.includes(WARN)).map((line) => JSON.parse(line) as { folders: string[] });
}

test('a fresh data dir: the data dir, redis/, its AOF folder, xiu/, the partitions and every file in them are private to the service user', { timeout: 60_000 }, async (t) => {
  const { dataDir, env } = await dataDirIn(t);
  // Keys given (README "Running in production"): no secrets/ folder, so the data dir is
  // made by the embedded Redis's folder or the store's, not by the secrets'.
  const token = randomBytes(32).toString('base64url');
  const serve = await spawnServe({ ...env, PIXIU_API_TOKEN: token, PIXIU_JWT_SECRET: randomBytes(32).toString('base64url') }, t);
  const sent = await new PixiuClient(serve.url, token).post('/v1/messages', { to: 'kim', type: 't', data: { text: 'for kim only' } });
  assert.equal(sent.status, 201, sent.text);

  let aof: string | undefined;
  await waitUntil('an AOF file holds the cluster secret', async () => (aof = await aofWithClusterSecret(dataDir)) !== undefined);
  for (const dir of [dataDir, path.join(dataDir, 'redis'), path.join(dataDir, 'redis', 'appendonly'), path.join(dataDir, 'xiu'), path.join(dataDir, 'xiu', '0')]) {
    assert.equal(await modeOf(dir), 0o700, dir);
  }
  assert.equal(await modeOf(aof as string), 0o600, 'the AOF holding the cluster secret is its owner\'s alone');
  assert.deepEqual(await openEntries(dataDir), [], 'nothing under the data dir has a bit for group or others');
  assert.deepEqual(openFolderWarns(serve.stdout()), []);
  assert.deepEqual(await serve.term(), { code: 0, signal: null }, serve.stderr());
});

test('a data dir its operator made 0755 (systemd StateDirectory=) is left so, with no warn: the folders in it are made 0700', { timeout: 60_000 }, async (t) => {
  const { dataDir, env } = await dataDirIn(t);
  await mkdir(dataDir);
  await chmod(dataDir, 0o755);
  const serve = await spawnServe(env, t);
  assert.equal(await modeOf(dataDir), 0o755, 'not changed');
  for (const name of ['redis', 'xiu', 'secrets']) assert.equal(await modeOf(path.join(dataDir, name)), 0o700, name);
  assert.deepEqual((await openEntries(dataDir)).slice(1), [], 'nothing in it has a bit for group or others');
  assert.deepEqual(openFolderWarns(serve.stdout()), []);
  assert.deepEqual(await serve.term(), { code: 0, signal: null }, serve.stderr());
});

test('an older release\'s data dir with redis/ and xiu/ open to others: a warn names them, they are left as they are, and chmod 700 ends it', { timeout: 60_000 }, async (t) => {
  const { dataDir, env } = await dataDirIn(t);
  const redisDir = path.join(dataDir, 'redis');
  const xiuDir = path.join(dataDir, 'xiu');
  for (const dir of [dataDir, redisDir, xiuDir]) {
    await mkdir(dir);
    await chmod(dir, 0o755);
  }
  const first = await spawnServe(env, t);
  assert.deepEqual(openFolderWarns(first.stdout()).map((w) => w.folders), [[redisDir, xiuDir]], first.stdout());
  for (const dir of [dataDir, redisDir, xiuDir]) assert.equal(await modeOf(dir), 0o755, `${dir} not changed`);
  assert.equal(await modeOf(path.join(dataDir, 'secrets')), 0o700, 'a new folder is private');
  assert.equal(await modeOf(path.join(xiuDir, '0')), 0o700, 'a new partition is private');
  assert.deepEqual(await first.term(), { code: 0, signal: null }, first.stderr());

  await chmod(redisDir, 0o700);
  await chmod(xiuDir, 0o700);
  const second = await spawnServe(env, t);
  assert.deepEqual(openFolderWarns(second.stdout()), []);
  assert.deepEqual(await second.term(), { code: 0, signal: null }, second.stderr());
});

/**
 * For the tests that start serve as root: a data dir made 0700 (root's), and a start of
 * serve on it (as root, or as `user`) that fails at once on Redis (refused: port 1)
 * after its checks of the data dir; undefined, the test skipped, when not root.
 */
async function rootsDataDir(t: TestContext): Promise<{ dataDir: string; start: (user?: { uid: number; gid: number }) => ReturnType<typeof runCli> } | undefined> {
  if (process.getuid?.() !== 0) {
    t.skip('needs root, to start serve as root and as another user');
    return undefined;
  }
  const { dataDir, env } = await dataDirIn(t);
  await mkdir(dataDir, { mode: 0o700 });
  const settings = { ...env, PIXIU_REDIS_URL: 'redis://127.0.0.1:1', PIXIU_API_TOKEN: 'root-start-api-token-0123456789', PIXIU_JWT_SECRET: 'root-start-jwt-secret-0123456789abcdef' };
  return { dataDir, start: (user) => runCli(['serve'], settings, user) };
}

test('started as root on a data dir another user owns: a warn says what follows and whose it is; on root\'s own, none (walk38 F7)', { timeout: 60_000 }, async (t) => {
  const made = await rootsDataDir(t);
  if (made === undefined) return;
  const { dataDir, start } = made;
  const warns = (stdout: string): unknown[] => logLines(stdout, ROOT_ON_OTHERS_DATA_DIR_LOG).map(({ dataDir: dir, owner }) => ({ dir, owner }));
  const own = await start();
  assert.equal(own.code, 1, own.stderr);
  assert.deepEqual(warns(own.stdout), [], 'root\'s own data dir');
  await chown(dataDir, 65534, 65534);
  const others = await start();
  assert.equal(others.code, 1, others.stderr);
  assert.deepEqual(warns(others.stdout), [{ dir: dataDir, owner: 65534 }], others.stdout);
});

test('after a start as root, the owner\'s next start says whose the lock\'s files are and how to give them back, not only LevelDB\'s Permission denied (walk39 F2)', { timeout: 60_000 }, async (t) => {
  const made = await rootsDataDir(t);
  if (made === undefined) return;
  const { dataDir, start } = made;
  await chown(dataDir, 65534, 65534);
  // As root: the data dir's lock is made (root's) before Redis is reached, then the start fails on Redis.
  assert.equal((await start()).code, 1);
  const owner = await start({ uid: 65534, gid: 65534 });
  assert.equal(owner.code, 1, owner.stderr);
  assert.match(owner.stderr, new RegExp(`cannot open ${path.join(dataDir, 'redis', 'lock')}: .*permission denied.* \\(it holds files of uid 0, not of this user, uid 65534: a start as another user, root\\?; `
    + `give the data dir back to this user: chown -R 65534:65534 ${dataDir}\\)`));
});
