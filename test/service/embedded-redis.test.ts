/**
 * `pixiu serve` without PIXIU_REDIS_URL (DESIGN.md §10): it starts its own
 * `redis-server` on a unix socket under the data dir, stops it on SIGTERM, and a
 * second start on the same data dir finds the first one's messages. Generated
 * secrets are kept in the data dir and printed once.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { appendFile, mkdir, readFile, readdir, stat, truncate, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { isAlive } from '../../src/process-alive.js';
import { localRedisSocket, REDIS_CONF_PATH, startLocalRedis } from '../../src/redis/local-server.js';
import { StartupError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { PixiuClient, runCli, spawnServe, type CleanupContext, type ServeProcess } from '../harness/pixiu-server.js';
import { embeddedDataDir } from '../harness/embedded-data-dir.js';
import { waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { spawnTied } from '../harness/tied-spawn.js';

/** What a serve printed, for the message of a failed exit check: stderr, then the end of its log. */
function output(serve: { stdout(): string; stderr(): string }): string {
  return `stderr:\n${serve.stderr()}\nstdout (end):\n${serve.stdout().slice(-6000)}`;
}

test('without PIXIU_REDIS_URL serve runs its own redis-server, stops it on SIGTERM, and a restart finds the messages', { timeout: 60_000 }, async (t) => {
  const { dataDir, env, pidFile } = await embeddedDataDir(t);

  const first = await spawnServe(env, t);
  const redisPid = Number(await readFile(pidFile, 'utf8'));
  assert.ok(redisPid > 0 && isAlive(redisPid), 'a redis-server process runs');
  const socket = localRedisSocket(dataDir);
  assert.equal(socket, path.join(dataDir, 'redis', 'redis.sock'));
  assert.ok(existsSync(socket), 'its socket is under <dataDir>/redis');

  const token = (await readFile(path.join(dataDir, 'secrets', 'api-token'), 'utf8')).trim();
  assert.ok(token.length >= 32);
  const sent = await new PixiuClient(first.url, token).post('/v1/messages', { to: 'kim', type: 't', data: { n: 1 } });
  assert.equal(sent.status, 201, sent.text);

  assert.deepEqual(await first.term(), { code: 0, signal: null }, output(first));
  assert.ok(!isAlive(redisPid), 'the redis-server it started is gone');
  assert.ok(first.stderr().includes(token), 'the generated API token is printed on first start');
  assert.match(first.stdout(), /"msg":"pixiu stopped"/);

  const second = await spawnServe(env, t);
  const history = await new PixiuClient(second.url, token).get('/v1/users/kim/messages');
  assert.equal(history.status, 200, history.text);
  const page = history.body as { messages: Array<{ id: string; seq: number; data: unknown }> };
  assert.deepEqual(page.messages.map((m) => [m.seq, m.id, m.data]), [[1, (sent.body as { id: string }).id, { n: 1 }]]);
  assert.deepEqual(await second.term(), { code: 0, signal: null }, output(second));
  assert.ok(!second.stderr().includes(token), 'the token is not printed again');
});

test('a frozen embedded redis-server (SIGSTOP) is stopped with serve, within the shutdown\'s Redis budget', { timeout: 60_000 }, async (t) => {
  const { env, pidFile } = await embeddedDataDir(t);
  // Redis steps of the shutdown get three command timeouts and a second: 2.5 s here.
  const serve = await spawnServe({ ...env, PIXIU_REDIS_COMMAND_TIMEOUT: '500ms' }, t);
  const redisPid = Number(await readFile(pidFile, 'utf8'));
  process.kill(redisPid, 'SIGSTOP');
  const began = performance.now();
  assert.deepEqual(await serve.term(), { code: 0, signal: null }, output(serve));
  const tookMs = performance.now() - began;
  // A stopped process handles SIGTERM only once continued: without a SIGCONT the stop
  // waited for its 10 s SIGKILL timeout on top of the budget.
  assert.ok(tookMs < 7_000, `exited ${Math.round(tookMs)} ms after SIGTERM`);
  await waitUntil('the redis-server is gone', async () => !isAlive(redisPid), 5_000);
});

test('the embedded redis-server is supervised: killed while serving, it is restarted and ingest works again', { timeout: 60_000 }, async (t) => {
  const { dataDir, env, pidFile } = await embeddedDataDir(t);
  const serve = await spawnServe(env, t);
  const token = (await readFile(path.join(dataDir, 'secrets', 'api-token'), 'utf8')).trim();
  const api = new PixiuClient(serve.url, token);
  const firstPid = Number(await readFile(pidFile, 'utf8'));
  process.kill(firstPid, 'SIGKILL');
  await waitUntil('a new redis-server runs', async () => {
    const pid = Number(await readFile(pidFile, 'utf8').catch(() => ''));
    return pid > 0 && pid !== firstPid && isAlive(pid);
  }, 20_000);
  await waitUntil('ingest works again', async () =>
    (await api.post('/v1/messages', { to: 'lou', type: 't', data: 1, client_msg_id: 'again' })).status === 201, 20_000);
  assert.match(serve.stdout(), /redis-server exited .* restarting it/);
  const restartedPid = Number(await readFile(pidFile, 'utf8'));
  assert.deepEqual(await serve.term(), { code: 0, signal: null }, output(serve));
  assert.ok(!isAlive(restartedPid), 'the restarted redis-server is stopped on SIGTERM');
});

/**
 * A serve whose embedded redis-server was killed after its AOF was damaged: each
 * restart fails on the AOF until it is mended (`mend`). `failed` reads the "cannot
 * restart" log lines so far.
 */
async function servingWithDamagedRedis(t: CleanupContext): Promise<{ serve: ServeProcess; mend: () => Promise<void>; failed: () => Array<Record<string, unknown>> }> {
  const { dataDir, env, pidFile } = await embeddedDataDir(t);
  const serve = await spawnServe(env, t);
  const aofDir = path.join(dataDir, 'redis', 'appendonly');
  const incr = (await readdir(aofDir)).find((f) => f.endsWith('.incr.aof'));
  assert.ok(incr !== undefined, 'the AOF has an incr file');
  const incrPath = path.join(aofDir, incr);
  const { size } = await stat(incrPath);
  // Corrupt, then killed: its restart fails on the AOF (Redis appends with O_APPEND, so
  // whatever it wrote after this stays behind the bad line).
  await appendFile(incrPath, 'not a redis command\r\n');
  process.kill(Number(await readFile(pidFile, 'utf8')), 'SIGKILL');
  const failed = (): Array<Record<string, unknown>> => serve.stdout().split('\n')
    .filter((l) => l.includes('cannot restart the local redis-server')).map((l) => JSON.parse(l) as Record<string, unknown>);
  return { serve, mend: () => truncate(incrPath, size), failed };
}

test('an embedded redis-server that cannot restart is logged with why (Redis\'s reason, not its start-up log, no stack), and restarted once it can', { timeout: 60_000 }, async (t) => {
  const { serve, mend, failed } = await servingWithDamagedRedis(t);
  await waitUntil('a failed restart is logged', async () => failed().length > 0, 20_000);
  const [line] = failed();
  // An ops newcomer's finding: the error's message was Redis's whole start-up log, with a stack.
  assert.equal(line?.level, 50);
  assert.match(String(line?.reason), /exited with code 1 before it was ready:\nBad file format reading the append only file/, JSON.stringify(line));
  assert.doesNotMatch(JSON.stringify(line), /oO0OoO0OoO0Oo|Memory overcommit|Configuration loaded|"stack"/);
  await mend();
  await waitUntil('the redis-server is back', async () => /local redis-server is back/.test(serve.stdout()), 20_000);
  assert.deepEqual(await serve.term(), { code: 0, signal: null }, output(serve));
});

test('SIGTERM while the embedded redis-server cannot restart stops the node through to "pixiu stopped", the restart\'s back-off cut short', { timeout: 60_000 }, async (t) => {
  const { serve, failed } = await servingWithDamagedRedis(t);
  // Five failed attempts: the next waits 5 s, so the signal comes during a back-off,
  // whose unref'd timer was all that kept the process running: Node ended it there.
  await waitUntil('five failed restarts', async () => failed().length >= 5, 20_000);
  assert.deepEqual(await serve.term(), { code: 0, signal: null }, output(serve));
  assert.match(serve.stdout(), /"msg":"pixiu stopped"/, output(serve));
});

test('a redis-server left running by a SIGKILLed pixiu is adopted, and stopped when the adopting pixiu stops', { timeout: 60_000 }, async (t) => {
  const { dataDir, env, pidFile } = await embeddedDataDir(t);
  const first = await spawnServe(env, t);
  const orphan = Number(await readFile(pidFile, 'utf8'));
  await first.kill();
  assert.ok(isAlive(orphan), 'its redis-server outlives a SIGKILLed pixiu (own process group)');
  const second = await spawnServe(env, t);
  assert.equal(second.stdout().match(/adopting redis-server left running/g)?.length, 1, second.stdout());
  assert.equal(Number(await readFile(pidFile, 'utf8')), orphan, 'no second server on the same AOF');
  assert.deepEqual(await second.term(), { code: 0, signal: null }, output(second));
  assert.ok(!isAlive(orphan), 'the adopted redis-server is stopped with the pixiu that adopted it');
});

test('a redis-server left running that still has a client is not adopted: the start is refused and that server and its client are left alone', { timeout: 60_000 }, async (t) => {
  const { dataDir, env, pidFile } = await embeddedDataDir(t);
  const first = await spawnServe(env, t);
  const orphan = Number(await readFile(pidFile, 'utf8'));
  await first.kill();
  // Something still uses that server (another pixiu that got past the data dir lock, a
  // redis-cli): a client that Redis has answered.
  const client = net.createConnection(localRedisSocket(dataDir));
  t.after(() => client.destroy());
  client.write('PING\r\n');
  const [pong] = await once(client, 'data') as [Buffer];
  assert.equal(pong.toString(), '+PONG\r\n');
  await assert.rejects(startLocalRedis({ dataDir, logger: createLogger('silent') }), (err: unknown) => {
    assert.ok(err instanceof StartupError, String(err));
    assert.match(err.message, new RegExp(`is in use: its redis-server \\(pid ${orphan}\\) has 1 client connection\\(s\\)`));
    return true;
  });
  assert.ok(isAlive(orphan), 'the server is not stopped');
  client.write('PING\r\n');
  const [again] = await once(client, 'data') as [Buffer];
  assert.equal(again.toString(), '+PONG\r\n', 'its client is still served');
});

test('a damaged AOF stops the start with the manifest path to give redis-check-aof --fix and what the fix loses', { timeout: 30_000 }, async (t) => {
  const { dataDir } = await embeddedDataDir(t);
  const logger = createLogger('silent');
  const local = await startLocalRedis({ dataDir, logger });
  const redis = new Redis({ path: localRedisSocket(dataDir) });
  for (let n = 0; n < 40; n++) await redis.set(`k${n}`, `value ${n}`);
  redis.disconnect();
  await local.stop();
  // One command's length prefix, past the middle of the incremental AOF, made garbage.
  const aofDir = path.join(dataDir, 'redis', 'appendonly');
  const incr = path.join(aofDir, (await readdir(aofDir)).find((f) => f.endsWith('.incr.aof')) ?? 'missing');
  const bytes = await readFile(incr);
  bytes[bytes.indexOf('$', bytes.length >> 1)] = 'X'.charCodeAt(0);
  await writeFile(incr, bytes);
  await assert.rejects(startLocalRedis({ dataDir, logger }), (err: unknown) => {
    assert.ok(err instanceof StartupError, String(err));
    assert.match(err.message, /^redis-server exited with code 1 before it was ready:\n/);
    assert.ok(err.message.endsWith(`\nthe embedded Redis's append-only file in ${aofDir} is damaged. Stop Pixiu (a running node keeps restarting its Redis), copy that folder aside, then run `
      + `\`redis-check-aof --fix ${path.join(aofDir, 'appendonly.aof.manifest')}\` and start again. --fix truncates the file at the damage: `
      + 'what Redis recorded after that point is lost — inbox entries (their messages stay in the store, unreachable through the inbox), '
      + 'acks, room members —, and a device that comes back with a last_seq past its inbox\'s new end gets a `reset`. '
      + '--fix mends only the last file the manifest lists: when it says it cannot truncate a file that is not the last, '
      + 'restore the folder from a backup (docs/decisions.md, "Embedded Redis")'), err.message);
    return true;
  });
});

test('a second serve on a data dir in use refuses to start and leaves the running one and its redis-server alone', { timeout: 60_000 }, async (t) => {
  const { dataDir, env, pidFile } = await embeddedDataDir(t);
  const first = await spawnServe(env, t);
  const redisPid = Number(await readFile(pidFile, 'utf8'));
  const second = await runCli(['serve'], env);
  assert.equal(second.code, 1, second.stdout + second.stderr);
  assert.match(second.stderr + second.stdout, /data dir .* is in use: another pixiu is starting or running on it/);
  assert.doesNotMatch(second.stdout, /adopting redis-server/);
  assert.ok(isAlive(redisPid), 'the running pixiu keeps its redis-server');
  assert.doesNotMatch(first.stdout(), /redis-server exited/);
  const token = (await readFile(path.join(dataDir, 'secrets', 'api-token'), 'utf8')).trim();
  const posted = await new PixiuClient(first.url, token).post('/v1/messages', { to: 'ana', type: 't', data: 1 });
  assert.equal(posted.status, 201, posted.text);
  assert.deepEqual(await first.term(), { code: 0, signal: null }, output(first));
  assert.ok(!isAlive(redisPid), 'and stops it on SIGTERM as before');
});

test('the embedded Redis lets go of its data dir when a start fails and when it stops (the same process starts it again), and a stop is no crash to restart from', { timeout: 60_000 }, async (t) => {
  const { dataDir, pidFile } = await embeddedDataDir(t);
  const { logger, lines } = capturingLogger();
  await assert.rejects(startLocalRedis({ dataDir, logger, binary: 'no-such-redis-server' }), /no-such-redis-server not found/);
  const first = await startLocalRedis({ dataDir, logger });
  const firstPid = Number(await readFile(pidFile, 'utf8'));
  await first.stop();
  assert.ok(!isAlive(firstPid), 'stopped');
  await first.stop(); // a second stop (a shutdown step run again) has nothing left to wait for
  const second = await startLocalRedis({ dataDir, logger });
  assert.equal(second.owned, true, 'started, not adopted');
  await second.stop();
  assert.deepEqual(lines.filter((l) => l.level >= 50).map((l) => l.msg), [], 'no exit taken for a crash');
});

test('a pid file naming a live process that is no Redis (a pid reused) is not adopted: a server is started, and that process is left alone', { timeout: 60_000 }, async (t) => {
  const { dataDir, pidFile } = await embeddedDataDir(t);
  const stranger = spawn('sleep', ['60'], { stdio: 'ignore' });
  t.after(() => stranger.kill('SIGKILL'));
  await mkdir(path.dirname(pidFile), { recursive: true });
  await writeFile(pidFile, `${stranger.pid}\n`);
  const local = await startLocalRedis({ dataDir, logger: createLogger('silent') });
  const started = Number(await readFile(pidFile, 'utf8'));
  await local.stop();
  assert.equal(local.owned, true, 'started, not adopted');
  assert.notEqual(started, stranger.pid);
  assert.ok(stranger.exitCode === null && stranger.signalCode === null, 'the stranger is not stopped with it');
});

test('the embedded Redis socket is <dataDir>/redis/redis.sock up to 107 bytes (sun_path\'s limit); past it, one stable short path per data dir in the user\'s private folder of the temp dir', () => {
  const suffix = path.join('redis', 'redis.sock');
  const fits = `/${'d'.repeat(107 - suffix.length - 2)}`; // "/ddd…" + "/" + suffix: 107 bytes
  assert.equal(Buffer.byteLength(localRedisSocket(fits)), 107);
  assert.equal(localRedisSocket(fits), path.join(fits, suffix));
  // One byte more, or as many characters when one takes two bytes: the temp dir instead.
  for (const over of [`${fits}d`, `${fits.slice(0, -1)}é`]) {
    const sock = localRedisSocket(over);
    assert.equal(path.dirname(sock), path.join(os.tmpdir(), `pixiu-${process.getuid?.()}`), over);
    assert.match(path.basename(sock), /^redis-[0-9a-f]{16}\.sock$/);
    assert.equal(localRedisSocket(over), sock, 'the same every time');
  }
  assert.notEqual(localRedisSocket(`${fits}d`), localRedisSocket(`${fits}e`), 'one per data dir');
});

test('an adopted redis-server that dies is restarted, as one it started is, and the restarted one is stopped with it', { timeout: 60_000 }, async (t) => {
  const { dataDir, pidFile } = await embeddedDataDir(t);
  // A server on the data dir as a SIGKILLed pixiu leaves it: no clients.
  const orphan = await startByHand(t, dataDir, pidFile);
  const { logger, lines } = capturingLogger();
  const local = await startLocalRedis({ dataDir, logger });
  assert.equal(local.owned, false, 'adopted');
  orphan.kill('SIGKILL');
  await waitUntil('a new redis-server runs', async () => {
    const pid = Number(await readFile(pidFile, 'utf8').catch(() => ''));
    return pid > 0 && pid !== orphan.pid && isAlive(pid);
  });
  const restarted = Number(await readFile(pidFile, 'utf8'));
  await local.stop();
  assert.ok(lines.some((l) => l.msg === `adopted redis-server (pid ${orphan.pid}) is gone while pixiu runs; restarting it`), JSON.stringify(lines.map((l) => l.msg)));
  assert.ok(!isAlive(restarted), 'the restarted server is stopped');
});

test('a redis-server started by hand on the data dir while the embedded one is down is adopted by the restart, not doubled, and stopped with it', { timeout: 60_000 }, async (t) => {
  const { dataDir, pidFile } = await embeddedDataDir(t);
  const { logger, lines } = capturingLogger();
  const local = await startLocalRedis({ dataDir, logger });
  const first = Number(await readFile(pidFile, 'utf8'));
  // It takes over the socket and the pid file; then the supervised one dies.
  const byHand = await startByHand(t, dataDir, pidFile);
  process.kill(first, 'SIGKILL');
  await waitUntil('the restart is done', async () => lines.some((l) => l.msg === 'local redis-server is back'));
  assert.equal(Number(await readFile(pidFile, 'utf8')), byHand.pid, 'no second server on the data dir');
  await local.stop();
  assert.ok(!isAlive(byHand.pid ?? 0), 'the adopted server is stopped with it');
});

/**
 * Starts a redis-server on `dataDir` as the embedded one runs (its socket, pid file and
 * AOF), not through startLocalRedis; resolves once it answers and has written its pid.
 */
async function startByHand(t: CleanupContext, dataDir: string, pidFile: string): Promise<ChildProcess> {
  const sock = localRedisSocket(dataDir);
  await mkdir(path.dirname(pidFile), { recursive: true });
  const server = spawnTied('redis-server', [REDIS_CONF_PATH, '--dir', path.dirname(pidFile), '--port', '0', '--unixsocket', sock, '--pidfile', pidFile, '--logfile', ''], { stdio: 'ignore' });
  t.after(() => server.kill('SIGKILL'));
  await waitUntil('the server started by hand answers and has written its pid', async () =>
    Number(await readFile(pidFile, 'utf8').catch(() => '')) === server.pid && await answersPing(sock));
  return server;
}

/** True when something on unix socket `sock` answers PING as Redis does. */
async function answersPing(sock: string): Promise<boolean> {
  const conn = net.createConnection(sock);
  try {
    await once(conn, 'connect');
    conn.write('PING\r\n');
    const [reply] = await once(conn, 'data') as [Buffer];
    return reply.toString() === '+PONG\r\n';
  } catch {
    return false;
  } finally {
    conn.destroy();
  }
}
