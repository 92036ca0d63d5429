/**
 * The embedded Redis's socket for a data dir whose `<dataDir>/redis/redis.sock` is too
 * long for a unix socket goes in the service user's private folder of the temp dir,
 * `<temp dir>/pixiu-<uid>/` (src/redis/socket-dir.ts), made 0700; a folder there that
 * is not this user's alone (another user's, open to others, a symbolic link, a file)
 * refuses the start with one line. Before, the socket was `/tmp/pixiu-redis-<hash>.sock`,
 * a name another local user could take first (secaudit F5). `pixiu inspect` checks the
 * folder the same way before it connects to a socket there, and refuses in the same line
 * (reread F2). Each test points TMPDIR at a
 * folder of its own, so its squatters never meet another test's Redis.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chmod, chown, lstat, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { execFile, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { isAlive } from '../../src/process-alive.js';
import { localRedisSocket, REDIS_CONF_PATH, startLocalRedis } from '../../src/redis/local-server.js';
import { StartupError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { runCli, type CleanupContext } from '../harness/pixiu-server.js';
import { waitUntil } from '../harness/checks.js';
import { killRedisOnCleanup } from '../harness/embedded-data-dir.js';
import { spawnTied } from '../harness/tied-spawn.js';
import { nodeArgsFor, siblingModule } from '../harness/test-build.js';
import { capturingLogger } from '../harness/log-capture.js';

const CHECK_SOCKET_DIR = siblingModule(import.meta.url, './fixtures/check-socket-dir');

/** A uid no test runs as (`nobody`): the squatter. */
const OTHER_UID = 65534;

/** A place for one test: a data dir too long for `<dataDir>/redis/redis.sock`, and TMPDIR. */
interface LongPlace {
  readonly dataDir: string;
  /** `<TMPDIR>/pixiu-<uid>`, where the socket is to go. */
  readonly socketDir: string;
}

/**
 * Makes a data dir whose path is over 107 bytes with its socket, and points TMPDIR at a
 * fresh folder until `t` ends; `t`'s clean-up kills a redis-server left on the data dir
 * (by its pid file) and removes both.
 */
async function longPlace(t: CleanupContext): Promise<LongPlace> {
  const base = await mkdtemp(path.join(os.tmpdir(), 'pixiu-sockdir-'));
  const dataDir = path.join(base, 'd'.repeat(100));
  await mkdir(dataDir);
  const tmp = path.join(base, 'tmp');
  await mkdir(tmp);
  const before = process.env.TMPDIR;
  process.env.TMPDIR = tmp;
  t.after(() => {
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
  });
  killRedisOnCleanup(t, dataDir);
  t.after(() => rm(base, { recursive: true, force: true }));
  return { dataDir, socketDir: path.join(tmp, `pixiu-${process.getuid?.()}`) };
}

test('a data dir too long for <dataDir>/redis/redis.sock gets its socket in the user\'s own 0700 folder of the temp dir, and Redis answers there', { timeout: 60_000 }, async (t) => {
  const { dataDir, socketDir } = await longPlace(t);
  const sock = localRedisSocket(dataDir);
  assert.equal(path.dirname(sock), socketDir);
  const local = await startLocalRedis({ dataDir, logger: createLogger('silent') });
  t.after(() => local.stop());
  const info = await lstat(socketDir);
  assert.ok(info.isDirectory() && !info.isSymbolicLink());
  assert.equal(info.uid, process.getuid?.());
  assert.equal(info.mode & 0o7777, 0o700);
  assert.ok(existsSync(sock), 'the socket is in it');
  const redis = new Redis({ path: sock, lazyConnect: true, maxRetriesPerRequest: 0 });
  t.after(() => redis.disconnect());
  assert.equal(await redis.ping(), 'PONG');
});

test('a redis-server left running on such a data dir (a SIGKILLed pixiu\'s) is found by its socket in the private folder and adopted, not doubled', { timeout: 60_000 }, async (t) => {
  const { dataDir, socketDir } = await longPlace(t);
  // As the embedded one runs, started by an earlier pixiu: its folder made, its socket, pid file and AOF.
  const dir = path.join(dataDir, 'redis');
  const pidFile = path.join(dir, 'redis.pid');
  const sock = localRedisSocket(dataDir);
  await mkdir(dir, { mode: 0o700 });
  await mkdir(socketDir, { mode: 0o700 });
  const left = spawnTied('redis-server', [REDIS_CONF_PATH, '--dir', dir, '--port', '0', '--unixsocket', sock, '--pidfile', pidFile, '--logfile', ''], { stdio: 'ignore' });
  t.after(() => left.kill('SIGKILL'));
  await waitUntil('the left-over redis-server has written its pid', async () => Number(await readFile(pidFile, 'utf8').catch(() => '')) === left.pid && existsSync(sock));
  const local = await startLocalRedis({ dataDir, logger: createLogger('silent') });
  await local.stop();
  assert.equal(local.owned, false, 'adopted');
  assert.ok(!isAlive(left.pid ?? 0), 'and stopped with it');
});

/** The squatters: what another user (or a mistake) leaves where the socket's folder goes. */
const SQUATTERS: ReadonlyArray<{ readonly what: string; readonly make: (dir: string) => Promise<void>; readonly says: RegExp }> = [
  {
    what: 'a folder another user made first (0700, theirs)',
    make: async (dir) => { await mkdir(dir, { mode: 0o700 }); await chown(dir, OTHER_UID, OTHER_UID); },
    says: new RegExp(`is owned by uid ${OTHER_UID}, not by this user \\(uid ${process.getuid?.()}\\)`),
  },
  {
    what: 'a folder of this user open to others (0755)',
    make: async (dir) => { await mkdir(dir); await chmod(dir, 0o755); },
    says: /has mode 0755, not 0700 \(group or others may use it\)/,
  },
  {
    what: 'a symbolic link to a folder of this user\'s (0700)',
    make: async (dir) => { const target = `${dir}-target`; await mkdir(target, { mode: 0o700 }); await symlink(target, dir); },
    says: /is a symbolic link, not a folder/,
  },
  { what: 'a file', make: (dir) => writeFile(dir, ''), says: /is not a folder/ },
];

for (const { what, make, says } of SQUATTERS) {
  test(`the start is refused, in one line naming the folder, when the socket's folder in the temp dir is ${what}`, { timeout: 60_000 }, async (t) => {
    const { dataDir, socketDir } = await longPlace(t);
    await make(socketDir);
    await assert.rejects(startLocalRedis({ dataDir, logger: createLogger('silent') }), (err: unknown) => {
      assert.ok(err instanceof StartupError, String(err));
      assert.ok(err.message.startsWith(`${socketDir} `), err.message);
      assert.match(err.message, says);
      assert.match(err.message, /another user could hold or take over the socket/);
      assert.match(err.message, /give PIXIU_DATA_DIR a shorter path/);
      assert.ok(!err.message.includes('\n'), 'one line');
      return true;
    });
    assert.ok(!existsSync(path.join(dataDir, 'redis', 'redis.pid')), 'no redis-server was started');
  });
}

for (const { what, make, says } of SQUATTERS) {
  test(`pixiu inspect refuses, in serve's one line, and does not connect, when the socket's folder in the temp dir is ${what}${what === 'a file' ? '' : ', a Redis listening at the socket\'s path in it'}`, { timeout: 60_000 }, async (t) => {
    const { dataDir, socketDir } = await longPlace(t);
    await make(socketDir);
    const sock = localRedisSocket(dataDir);
    // The squatter's Redis, where inspect would look for the embedded one (none can be in a file).
    let planted: ChildProcess | undefined;
    if (what !== 'a file') {
      planted = spawnTied('redis-server', ['--port', '0', '--unixsocket', sock, '--save', '', '--appendonly', 'no', '--dir', path.dirname(socketDir)], { stdio: 'ignore' });
      t.after(() => planted?.kill('SIGKILL'));
      await waitUntil('the squatter\'s redis-server listens', async () => existsSync(sock));
    }
    const run = await runCli(['inspect', 'cluster'], { PIXIU_DATA_DIR: dataDir, TMPDIR: path.dirname(socketDir) });
    assert.equal(run.code, 1, run.stdout);
    assert.equal(run.stdout, '');
    assert.ok(run.stderr.startsWith(`pixiu: ${socketDir} `), run.stderr);
    assert.match(run.stderr, says);
    assert.match(run.stderr, /another user could hold or take over the socket/);
    assert.equal(run.stderr.split('\n').length, 2, `one line: ${run.stderr}`);
    if (planted !== undefined) {
      const redis = new Redis({ path: sock, lazyConnect: true, maxRetriesPerRequest: 0 });
      t.after(() => redis.disconnect());
      const stats = await redis.info('stats');
      assert.match(stats, /^total_connections_received:1\r?$/m, 'no connection but this one');
    }
  });
}

test('a restart of the embedded Redis checks the socket\'s folder before its left-over probe: another user\'s folder made while Redis was down, their redis-server at the socket on the data dir, is neither probed nor adopted', { timeout: 60_000 }, async (t) => {
  const { dataDir, socketDir } = await longPlace(t);
  const sock = localRedisSocket(dataDir);
  const dir = path.join(dataDir, 'redis');
  const { logger, lines } = capturingLogger();
  const local = await startLocalRedis({ dataDir, logger });
  t.after(() => local.stop());
  const ours = Number(await readFile(path.join(dir, 'redis.pid'), 'utf8'));
  // A temp-dir cleaner removes the folder; another user makes it again, and runs a
  // redis-server on the data dir (its pid file, its socket) that the probe would take
  // for one started by hand meanwhile, and adopt.
  await rm(socketDir, { recursive: true, force: true });
  await mkdir(socketDir, { mode: 0o700 });
  await chown(socketDir, OTHER_UID, OTHER_UID);
  const theirs = spawnTied('redis-server', ['--port', '0', '--unixsocket', sock, '--dir', dir, '--pidfile', path.join(dir, 'redis.pid'), '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  t.after(() => theirs.kill('SIGKILL'));
  await waitUntil('their redis-server listens and has written its pid', async () => existsSync(sock)
    && Number(await readFile(path.join(dir, 'redis.pid'), 'utf8').catch(() => '')) === theirs.pid);
  process.kill(ours, 'SIGKILL');
  await waitUntil('a restart attempt is refused for the folder', async () => lines.some((l) => l.msg === 'cannot restart the local redis-server; retrying'
    && String(l.err ?? JSON.stringify(l)).includes(`is owned by uid ${OTHER_UID}`)));
  assert.ok(!lines.some((l) => l.msg === 'local redis-server is back'), 'not adopted');
  const redis = new Redis({ path: sock, lazyConnect: true, maxRetriesPerRequest: 0 });
  t.after(() => redis.disconnect());
  assert.match(await redis.info('stats'), /^total_connections_received:1\r?$/m, 'not probed: no connection but this one');
});

test('a socket folder in a temp dir this user may not search: the check says so in one line (a StartupError), not a bare EACCES', async (t) => {
  const base = await mkdtemp(path.join(os.tmpdir(), 'pixiu-sockdir-'));
  // Root searches any folder: a root run checks as nobody, whom base (0755) lets in and
  // `locked` (root's, 0700) does not; another user's run meets a folder of mode 0000.
  const asRoot = process.getuid?.() === 0;
  await chmod(base, 0o755);
  const locked = path.join(base, 'locked');
  await mkdir(locked, { mode: 0o700 });
  if (!asRoot) await chmod(locked, 0o000);
  t.after(async () => {
    await chmod(locked, 0o700);
    await rm(base, { recursive: true, force: true });
  });
  const dir = path.join(locked, `pixiu-${asRoot ? OTHER_UID : process.getuid?.()}`);
  const dataDir = path.join(base, 'd'.repeat(100));
  const { stdout } = await promisify(execFile)(process.execPath, [...nodeArgsFor(CHECK_SOCKET_DIR), dir, dataDir],
    asRoot ? { uid: OTHER_UID, gid: OTHER_UID } : {});
  assert.equal(stdout, `StartupError: cannot look at ${dir} (the embedded Redis's socket goes there because ${dataDir}/redis/redis.sock is longer than a unix socket path may be): EACCES: permission denied, lstat '${dir}'`);
});

test('pixiu inspect run as root on a data dir of another user (the service\'s) looks for the socket in that user\'s folder, not in its own (walk39 F1)', { timeout: 60_000 }, async (t) => {
  if (process.getuid?.() !== 0) {
    t.skip('needs root, to give the data dir and the socket\'s folder to another user');
    return;
  }
  const { dataDir, socketDir } = await longPlace(t);
  await chown(dataDir, OTHER_UID, OTHER_UID);
  const serviceDir = path.join(path.dirname(socketDir), `pixiu-${OTHER_UID}`);
  await mkdir(serviceDir, { mode: 0o700 });
  await chown(serviceDir, OTHER_UID, OTHER_UID);
  const sock = localRedisSocket(dataDir, OTHER_UID);
  assert.equal(path.dirname(sock), serviceDir);
  // The service's embedded Redis (a plain one here: inspect reads it and finds no Pixiu in it).
  const served = spawnTied('redis-server', ['--port', '0', '--unixsocket', sock, '--save', '', '--appendonly', 'no', '--dir', serviceDir], { stdio: 'ignore' });
  t.after(() => served.kill('SIGKILL'));
  await waitUntil('the service\'s redis-server listens', async () => existsSync(sock));
  const run = await runCli(['inspect', 'cluster'], { PIXIU_DATA_DIR: dataDir, TMPDIR: path.dirname(socketDir) });
  assert.doesNotMatch(run.stderr, /no embedded Redis/i, run.stderr);
  const redis = new Redis({ path: sock, lazyConnect: true, maxRetriesPerRequest: 0 });
  t.after(() => redis.disconnect());
  const connections = Number(/^total_connections_received:(\d+)/m.exec(await redis.info('stats'))?.[1]);
  assert.ok(connections >= 2, `inspect connected to the service's Redis (${connections} connections, this one included)`);
});
