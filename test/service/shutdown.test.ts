/**
 * Graceful shutdown of `pixiu serve` (src/cli/serve.ts, DESIGN.md §6): SIGINT — a
 * terminal's Ctrl-C, sent to the whole foreground process group — does what SIGTERM
 * does: exit 0 and stop the embedded redis-server, which Ctrl-C itself must not reach
 * (a repeat of the signal, as `npm start` passes it on, is the same request; a second
 * Ctrl-C later exits 1 at once, still stopping that redis-server);
 * and a request in flight when the signal arrives is finished and answered normally
 * before the process exits, its answer ending its connection; a request pipelined
 * behind it is not done, and refused 503 after it, that refusal then ending the
 * connection (only the last answer in progress closes it: src/api/shutdown.ts).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { Inbox } from '../../src/inbox/inbox.js';
import { createRedis } from '../../src/redis/client.js';
import { openInbox, readWholeInbox, waitUntil } from '../harness/checks.js';
import { listeningUrl, packageCopy, spawnCli, type CliProcess } from '../harness/cli-process.js';
import { spawnServe, startInProcess, tempDataDir, type CleanupContext, type ExitStatus, type ServeProcess } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { logLines } from '../harness/log-capture.js';
import { REPEATED_SIGNAL_MS } from '../../src/cli/stop-signals.js';
import { isAlive } from '../../src/process-alive.js';
import { TestClient, testToken } from '../harness/ws-client.js';

const API_TOKEN = 'shutdown-test-api-token-0123456789';


/** True when nothing accepts a TCP connection on 127.0.0.1:`port` (a serve that stopped listening). */
function refusesConnections(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const probe = net.connect(port, '127.0.0.1');
    probe.once('connect', () => { probe.destroy(); resolve(false); });
    probe.once('error', () => resolve(true));
  });
}

/**
 * `pixiu serve` in a process group of its own (so a test can send Ctrl-C to the group)
 * with no PIXIU_REDIS_URL: it runs its own redis-server in a new data dir. Clean-up runs
 * in the order added: serve is killed first (spawnCli), then, should the test have
 * failed, the redis-server it leaves running, by its pid file, and only then is the
 * data dir removed.
 */
async function serveWithOwnRedis(t: TestContext, prefix: string, env: Record<string, string> = {}): Promise<{ serve: CliProcess; url: string; redisPid: number }> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), prefix));
  const pidFile = path.join(dataDir, 'redis', 'redis.pid');
  const serve = spawnCli(['serve'], { PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0', PIXIU_API_TOKEN: API_TOKEN, ...env }, t, { detached: true });
  t.after(async () => {
    const pid = Number(await readFile(pidFile, 'utf8').catch(() => ''));
    if (pid > 0 && isAlive(pid)) process.kill(pid, 'SIGKILL');
  });
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const url = listeningUrl(await serve.line((l) => listeningUrl(l) !== undefined, 'the listening line')) as string;
  const redisPid = Number(await readFile(pidFile, 'utf8'));
  assert.ok(redisPid > 0 && isAlive(redisPid), 'a redis-server runs');
  return { serve, url, redisPid };
}

test('Ctrl-C (SIGINT to the process group, and again as `npm start` passes it on) on serve with its own redis-server: exit 0, that redis-server stopped, nothing restarted', { timeout: 60_000 }, async (t: TestContext) => {
  // At debug level serve forwards redis-server's own log, which names the signal it got.
  // With a drain delay set, which SIGINT skips (drain-delay.test.ts): a delay begun would
  // hold the exit for 10 minutes (the second SIGINT is the same signal, not a cut).
  const { serve, url, redisPid } = await serveWithOwnRedis(t, 'pixiu-sigint-', { PIXIU_LOG_LEVEL: 'debug', PIXIU_DRAIN_DELAY: '10m' });
  const sent = await fetch(`${url}/v1/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ to: 'ivy', type: 't', data: 1 }),
  });
  assert.equal(sent.status, 201, 'the service works on its own redis-server');

  // A terminal sends Ctrl-C to the process group, and `npm start` passes the SIGINT it
  // got on to its script: serve gets it twice, a millisecond apart. That is one request.
  serve.signal('SIGINT', { group: true });
  serve.signal('SIGINT');
  const exit = await serve.exited;
  assert.deepEqual(exit, { code: 0, signal: null }, serve.stderr());
  assert.doesNotMatch(serve.stdout(), /second signal/);
  assert.ok(!isAlive(redisPid), 'the redis-server it started is gone');
  assert.deepEqual(logLines(serve.stdout(), 'shutting down').map((l) => [l.signal, l.drainDelayMs]), [['SIGINT', undefined]], 'no drain delay on SIGINT');
  assert.deepEqual(logLines(serve.stdout(), 'drain delay over, shutting down'), []);
  assert.equal(logLines(serve.stdout(), 'pixiu stopped').length, 1, 'the shutdown ran to its end');
  // Ctrl-C reached only Pixiu: its redis-server, in a process group of its own, was
  // stopped by Pixiu (SIGTERM) once the rest was closed, not shut down under it by the
  // SIGINT (then restarted by the supervisor, or failing the last cursor flushes).
  assert.doesNotMatch(serve.stdout(), /Received SIGINT/);
  assert.doesNotMatch(serve.stdout(), /restarting it|shutdown step failed/);
});

test('a second Ctrl-C while serve drains exits 1 at once, and its own redis-server is stopped all the same', { timeout: 60_000 }, async (t: TestContext) => {
  const { serve, url, redisPid } = await serveWithOwnRedis(t, 'pixiu-sigint2-');
  // A POST whose body never ends holds the graceful shutdown open.
  const socket = net.connect(Number(new URL(url).port), '127.0.0.1');
  t.after(() => socket.destroy());
  await once(socket, 'connect');
  socket.write(['POST /v1/messages HTTP/1.1', 'Host: 127.0.0.1', `Authorization: Bearer ${API_TOKEN}`,
    'Content-Type: application/json', 'Content-Length: 100', 'Expect: 100-continue', '', ''].join('\r\n'));
  await once(socket, 'data'); // 100 Continue: the server has the request

  serve.signal('SIGINT', { group: true });
  await serve.line((l) => l.includes('"shutting down"'), 'the shutdown line');
  // The rule is one of time: a repeat within REPEATED_SIGNAL_MS is the same Ctrl-C.
  await delay(REPEATED_SIGNAL_MS + 100);
  assert.equal(serve.proc.exitCode, null, 'still draining');
  serve.signal('SIGINT', { group: true });
  assert.deepEqual(await serve.exited, { code: 1, signal: null }, serve.stderr());
  assert.equal(logLines(serve.stdout(), 'second signal, exiting now').length, 1);
  await waitUntil('its redis-server to stop', async () => !isAlive(redisPid), 15_000);
});

test('SIGTERM to `npm start` (the README\'s run command, as a supervisor sends it) stops the server and its redis-server, not only npm', { timeout: 120_000 }, async (t: TestContext) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'pixiu-npm-start-'));
  const pidFile = path.join(dataDir, 'redis', 'redis.pid');
  let servePid = 0;
  // Added first, so it runs first: should the test fail, a server left running holds
  // npm's output open, and the wait for it below would never end.
  t.after(async () => {
    for (const pid of [servePid, Number(await readFile(pidFile, 'utf8').catch(() => ''))]) if (pid > 0 && isAlive(pid)) process.kill(pid, 'SIGKILL');
  });
  // In a copy of the package: npm start's build rewrites dist/, which other test files'
  // pixiu processes load meanwhile.
  const npm = spawnCli([], { PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0', PIXIU_API_TOKEN: API_TOKEN }, t, { command: ['npm', 'start'], cwd: await packageCopy(t) });
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  // `npm start` builds first: the bound covers tsc.
  const listening = await npm.line((l) => listeningUrl(l) !== undefined, 'the listening line', 90_000);
  servePid = Number((JSON.parse(listening) as { pid?: number }).pid);
  const redisPid = Number(await readFile(pidFile, 'utf8'));
  assert.ok(servePid > 0 && servePid !== npm.proc.pid, 'serve runs in a process of its own');

  npm.proc.kill('SIGTERM'); // npm alone, not its process group
  // Its exit, not its output's end: a server left running would hold that open.
  if (npm.proc.exitCode === null && npm.proc.signalCode === null) await once(npm.proc, 'exit');
  await waitUntil('the serve process to exit', async () => !isAlive(servePid), 15_000);
  assert.ok(!isAlive(redisPid), 'its redis-server is stopped too');
  assert.equal(logLines(npm.stdout(), 'pixiu stopped').length, 1, 'serve ran its shutdown');
});

/** One HTTP/1.1 response read off a raw socket. */
interface RawResponse {
  readonly status: number;
  /** Header names in lower case. */
  readonly headers: ReadonlyMap<string, string>;
  readonly body: string;
}

/**
 * The complete responses at the start of `text` (HTTP/1.1, each with Content-Length,
 * as fastify sends them; interim `100 Continue` included).
 */
function parseResponses(text: string): RawResponse[] {
  const out: RawResponse[] = [];
  let rest = text;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) return out;
    const [statusLine = '', ...lines] = rest.slice(0, end).split('\r\n');
    const headers = new Map(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
    const length = Number(headers.get('content-length') ?? 0);
    if (rest.length < end + 4 + length) return out;
    out.push({ status: Number(statusLine.split(' ')[1]), headers, body: rest.slice(end + 4, end + 4 + length) });
    rest = rest.slice(end + 4 + length);
  }
}

/** A serve draining with one POST in flight on a raw connection. */
interface Draining {
  readonly serve: ServeProcess;
  readonly inbox: Inbox;
  /** The raw connection the POST is on. */
  readonly socket: net.Socket;
  /** The rest of the POST's body, not sent yet. */
  readonly rest: string;
  /** Resolves with serve's exit. */
  readonly stopped: Promise<ExitStatus>;
  /** Resolves with the responses once there are `count` (interim ones included). */
  responses(count: number): Promise<RawResponse[]>;
  /** Resolves with every response received once the connection has closed. */
  readonly closed: Promise<RawResponse[]>;
}

/**
 * Starts `pixiu serve`, sends it the headers and half the body of a POST to `ola`, and
 * SIGTERMs it once the request is in flight; resolves once serve has stopped accepting
 * connections, the POST still open. Deterministic: with `Expect: 100-continue` the
 * server answers 100 once fastify has the request, and the closed port shows that its
 * close has begun.
 */
async function drainWithPostInFlight(t: CleanupContext, prefix: string): Promise<Draining> {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const serve = await spawnServe({
    PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: prefix, PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_PORT: '0',
    PIXIU_API_TOKEN: API_TOKEN, PIXIU_LOG_LEVEL: 'info',
  }, t);
  const { inbox } = await openInbox(t, redis.url, prefix);
  const port = Number(new URL(serve.url).port);
  const socket = net.connect(port, '127.0.0.1');
  t.after(() => socket.destroy());
  let received = '';
  const arrived = new Set<() => void>();
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    received += chunk;
    for (const wake of arrived) wake();
  });
  const closed = once(socket, 'close').then(() => parseResponses(received));
  const responses = (count: number): Promise<RawResponse[]> => new Promise((resolve, reject) => {
    const check = (): void => {
      const parsed = parseResponses(received);
      if (parsed.length < count) return;
      arrived.delete(check);
      resolve(parsed);
    };
    arrived.add(check);
    check();
    void closed.then((all) => {
      check();
      reject(new Error(`connection closed with ${all.length} of ${count} responses:\n${received}`));
    });
  });
  await once(socket, 'connect');

  const body = JSON.stringify({ to: 'ola', type: 't', data: { text: 'sent across the shutdown' }, client_msg_id: 'in-flight' });
  const half = Math.floor(body.length / 2);
  socket.write(['POST /v1/messages HTTP/1.1', 'Host: 127.0.0.1', `Authorization: Bearer ${API_TOKEN}`,
    'Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`, 'Expect: 100-continue', '', ''].join('\r\n'));
  const [interim] = await responses(1);
  assert.equal(interim?.status, 100, 'the server has the request');
  socket.write(body.slice(0, half));

  const stopped = serve.term();
  await waitUntil('serve stops accepting connections', () => refusesConnections(port), 20_000);
  assert.equal(serve.proc.exitCode, null, 'serve still runs, finishing the request');
  return { serve, inbox, socket, rest: body.slice(half), stopped, responses, closed };
}

test('a POST in flight when SIGTERM arrives is finished and answered 201, then serve exits 0', { timeout: 60_000 }, async (t: TestContext) => {
  const { serve, inbox, socket, rest, stopped, responses } = await drainWithPostInFlight(t, 'flight:');
  // The rest of the body only now, with the server closing.
  socket.write(rest);
  const [, answer] = await responses(2);
  assert.equal(answer?.status, 201, answer?.body);
  // It ends its connection: a keep-alive connection left open would hold the close up.
  assert.equal(answer.headers.get('connection'), 'close');
  const created = JSON.parse(answer.body) as { id: string; recipients: unknown; duplicate: boolean };
  assert.deepEqual(created.recipients, [{ user: 'ola', seq: 1 }]);
  assert.equal(created.duplicate, false);
  assert.deepEqual(await stopped, { code: 0, signal: null }, serve.stderr());
  // No PIXIU_DRAIN_DELAY: SIGTERM stops at once (drain-delay.test.ts has the delay).
  assert.deepEqual(logLines(serve.stdout(), 'shutting down').map((l) => [l.signal, l.drainDelayMs]), [['SIGTERM', undefined]], 'no drain delay by default');
  assert.deepEqual(logLines(serve.stdout(), 'drain delay over, shutting down'), []);
  assert.equal(logLines(serve.stdout(), 'pixiu stopped').length, 1);
  assert.deepEqual(logLines(serve.stdout(), CUT_UNANSWERED), [], 'nothing was cut');
  // It was really done, not just answered: the inbox holds it.
  assert.deepEqual((await readWholeInbox(inbox, 'ola')).map((e) => [e.seq, e.id]), [[1, created.id]]);
});

/** The log line of the requests the end of the shutdown grace cut (src/gateway/upgrade-guard.ts). */
const CUT_UNANSWERED = 'shutdown grace period over: requests still in flight are cut unanswered (their clients see the connection close and must send them again)';

test('a POST whose body is still arriving when the shutdown grace period ends is cut unanswered, and the log says how many requests were', { timeout: 60_000 }, async (t: TestContext) => {
  const { serve, inbox, closed, stopped } = await drainWithPostInFlight(t, 'cut:');
  // The rest of the body never comes.
  assert.deepEqual((await closed).map((r) => r.status), [100], 'no answer but the 100');
  assert.deepEqual(await stopped, { code: 0, signal: null }, serve.stderr());
  const cut = logLines(serve.stdout(), CUT_UNANSWERED);
  assert.deepEqual(cut.map((l) => [l.level, l.requests]), [[40, 1]], serve.stdout());
  assert.deepEqual(await readWholeInbox(inbox, 'ola'), [], 'not done');
});

test('while serve drains, a request pipelined behind the one in flight is not done: refused 503 after the first answer, which leaves the close to it', { timeout: 60_000 }, async (t: TestContext) => {
  const { serve, inbox, socket, closed, rest, stopped, responses } = await drainWithPostInFlight(t, 'drain:');
  // The end of the POST and, pipelined behind it, a second one.
  const next = JSON.stringify({ to: 'ola', type: 't', data: 2 });
  socket.write([`${rest}POST /v1/messages HTTP/1.1`, 'Host: 127.0.0.1', `Authorization: Bearer ${API_TOKEN}`,
    'Content-Type: application/json', `Content-Length: ${Buffer.byteLength(next)}`, '', next].join('\r\n'));
  const [, first, refused] = await responses(3);
  assert.equal(first?.status, 201, first?.body);
  assert.equal(first.headers.get('connection'), 'keep-alive', 'the close is left to the last answer');
  // Refused, and undone: the producer may send it again, elsewhere or later.
  assert.equal(refused?.status, 503, refused?.body);
  assert.equal(refused.headers.get('connection'), 'close', 'the last answer ends the connection');
  assert.deepEqual((await closed).map((r) => r.status), [100, 201, 503]);
  assert.deepEqual(await stopped, { code: 0, signal: null }, serve.stderr());
  assert.deepEqual((await readWholeInbox(inbox, 'ola')).map((e) => e.seq), [1], 'only the request in flight was done');
});

test('with Redis not answering, SIGTERM stops serve accepting at once, before any shutdown step that waits on Redis; the ack cursors it could not write are logged as an error; it exits 0 within its time for Redis', { timeout: 120_000 }, async (t: TestContext) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const dataDir = await tempDataDir(t, 'pixiu-hung-');
  const jwtSecret = 'shutdown-test-jwt-secret-0123456789abcdef';
  // A long command timeout: every step that waits on the frozen Redis waits this long.
  // Acks are written once an hour: the client's ack is still held at the SIGTERM. Debug
  // logging on: each connection then logs through a child logger of its own.
  const serve = await spawnServe({
    PIXIU_REDIS_URL: redis.url, PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0', PIXIU_API_TOKEN: API_TOKEN, PIXIU_JWT_SECRET: jwtSecret,
    PIXIU_REDIS_COMMAND_TIMEOUT: '4s', PIXIU_CLAIMS_SETTLE: '0s', PIXIU_ACK_FLUSH_INTERVAL: '1h', PIXIU_LOG_LEVEL: 'debug',
  }, t);
  const port = Number(new URL(serve.url).port);
  const client = await TestClient.connect(serve.url, { token: await testToken({ kind: 'secret', secret: jwtSecret }, 'una'), params: { device: 'phone' } });
  t.after(() => client.close());
  await client.nextOf('welcome');
  // The log reaches the test through serve's stdout, maybe after the welcome frame.
  await waitUntil('the connection open line', async () => logLines(serve.stdout(), 'connection open').length > 0, 10_000);
  assert.deepEqual(logLines(serve.stdout(), 'connection open').map((l) => [l.level, l.user, l.device]), [[20, 'una', 'phone']]);
  const posted = await fetch(`${serve.url}/v1/messages`, {
    method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ to: 'una', type: 't', data: 1 }),
  });
  assert.equal(posted.status, 201);
  await client.msgs(1, { ack: true });
  // Frames are handled in order: once the pong is back, the ack is held by the server.
  client.send({ t: 'ping' });
  await client.nextOf('pong');

  redis.pause();
  t.after(() => redis.resume());
  const began = performance.now();
  const stopped = serve.term();
  // Refused within one command timeout: no step waited on Redis first (it took new
  // work for ~11 s with the 2 s default, one command timeout per step).
  await waitUntil('serve stops accepting connections', () => refusesConnections(port), 3_000);
  assert.ok(performance.now() - began < 4_000, 'refused before a Redis command could time out');
  assert.equal((await client.waitClose()).code, 1001);
  assert.equal(serve.proc.exitCode, null, 'still stopping: its Redis steps wait');
  // Redis stays hung: the steps that wait on it share three command timeouts and a
  // second (shutdown-steps.ts), then serve exits all the same, its store closed.
  assert.deepEqual(await stopped, { code: 0, signal: null }, serve.stderr());
  const tookMs = performance.now() - began;
  assert.ok(tookMs < 3 * 4_000 + 1_000 + 4_000, `exited ${Math.round(tookMs)} ms after SIGTERM`);
  assert.equal(logLines(serve.stdout(), 'message store closed').length, 1);
  assert.equal(logLines(serve.stdout(), 'pixiu stopped').length, 1);
  // The ack write timed out: the cursor died with the process, and the log says so.
  const [lost] = logLines(serve.stdout(), ACKS_LOST);
  assert.equal(lost?.level, 50, serve.stdout());
  assert.equal(lost?.users, 1);
  assert.deepEqual(lost?.sample, ['una']);
  // The steps Redis held up were handled: each a warning naming it and its time, no
  // stack; none an error (an ops newcomer's finding: three level-50 lines with stacks).
  assert.deepEqual(logLines(serve.stdout(), 'shutdown step failed'), [], serve.stdout());
  const givenUp = logLines(serve.stdout(), 'shutdown step given up: not done in its time (Redis does not answer?); going on without it');
  assert.ok(givenUp.length > 0, serve.stdout());
  for (const line of givenUp) assert.deepEqual([line.level, typeof line.what, typeof line.timeoutMs, 'err' in line], [40, 'string', 'number', false], JSON.stringify(line));
});

const ACKS_LOST = 'ack cursors could not be written before shutdown (Redis unavailable); their devices will be sent those messages again';

/**
 * The TCP state (proc(5) `st`, hex: 01 established) of this machine's IPv4 connection
 * from 127.0.0.1:`port` to 127.0.0.1:`peerPort`, if any. Both ends, not the local port
 * alone: Linux gives one ephemeral port to connections to different destinations (224
 * of 6,560 local ports were shared on the 2-core machine with test files running), so
 * another connection, still established, may hold the same local port.
 */
function tcpStateOf(port: number, peerPort: number): string | undefined {
  const hex = (p: number): string => `0100007F:${p.toString(16).toUpperCase().padStart(4, '0')}`;
  const row = readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1).map((line) => line.trim().split(/\s+/)).find((f) => f[1] === hex(port) && f[2] === hex(peerPort));
  return row?.[3];
}

test('with Redis not answering, the shutdown drops its Redis connection as soon as it gives up on it, not a command timeout later', { timeout: 60_000 }, async (t: TestContext) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  // The Redis steps get 3 × 2 s + 1 s; the last, the connection's QUIT, gets the
  // second or so that is left, then the connection is dropped.
  const { service } = await startInProcess(t, { redisUrl: redis.url, redisCommandTimeoutMs: '2000' });
  const probe = await createRedis({ url: redis.url, commandTimeoutMs: 2000 });
  const clients = String(await probe.client('LIST'));
  await probe.quit();
  const addr = /addr=127\.0\.0\.1:(\d+) .*name=pixiu /.exec(clients)?.[1];
  assert.ok(addr !== undefined, clients);
  const port = Number(addr);
  assert.equal(tcpStateOf(port, redis.port), '01', 'the service\'s connection is open');

  redis.pause();
  t.after(() => redis.resume());
  await service.close();
  // Its QUIT would time out a second or so after this: the connection is closed from the
  // service's side (FIN sent) without waiting for it. The bound is one turn of the event
  // loop, not a time: giving up ends the socket (ioredis's disconnect), and libuv sends
  // its FIN in the next turn's I/O phases, before that turn's timers; without giveUp the
  // connection is closed by the QUIT's command timeout, a timer due a second later. A
  // time bound (500 ms) failed on a loaded machine: the service runs in this process,
  // whose turns then took 0.2 – 1.4 s (load 6 – 17; a read of /proc/net/tcp 50 – 350 ms).
  await new Promise<void>((resolve) => setImmediate(resolve));
  assert.notEqual(tcpStateOf(port, redis.port), '01', 'the service\'s Redis connection is closed');
});
