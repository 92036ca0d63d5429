/**
 * `pixiu connect <uid>` ended with Ctrl-C, as the README walkthrough does: the client
 * closes 1000 (`closed 1000 bye` on stderr), exits 0, and its last stdout line is the
 * `{"last_seq", "epoch"}` to resume from — against the real service on a real port.
 * Closed by the server instead (4002), it exits 1; a --url it cannot use exits 1; a
 * refused upgrade or a port nobody listens on is one error line and exit 1.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { createServer, type Socket } from 'node:net';
import http from 'node:http';
import path from 'node:path';
import { writeFile } from 'node:fs/promises';
import { WebSocketServer, type WebSocket } from 'ws';
import { REPEATED_SIGNAL_MS } from '../../src/cli/stop-signals.js';
import type { AddressInfo } from 'node:net';
import { openInbox, waitUntil } from '../harness/checks.js';
import { spawnCli } from '../harness/cli-process.js';
import { cleanupList, runCli, runEach, startInProcessAlone, tempDataDir, type CleanupContext, type InProcessServer } from '../harness/pixiu-server.js';
import { testToken } from '../harness/ws-client.js';
import type { RedisServer } from '../harness/redis-server.js';

const JWT_SECRET = 'cli-connect-tests-hs256-secret-of-32-chars';

let redis: RedisServer;
let server: InProcessServer;
const files = cleanupList();

before(async () => {
  ({ redis, server } = await startInProcessAlone(files, { jwtSecret: JWT_SECRET }));
});

after(() => files.run());

/** Posts one chat message to `user`; resolves with its seq. */
async function post(user: string, text: string): Promise<number> {
  const answer = await server.client.post('/v1/messages', { to: user, type: 'chat.text', data: { text } });
  assert.equal(answer.status, 201, answer.text);
  return (answer.body as { recipients: Array<{ seq: number }> }).recipients[0]?.seq as number;
}

/** A stdout line as a frame, or undefined when it is not JSON. */
function lineFrame(line: string): { t?: unknown; seq?: unknown; channel?: unknown } | undefined {
  try {
    return JSON.parse(line) as { t?: unknown; seq?: unknown; channel?: unknown };
  } catch {
    return undefined;
  }
}

/** A predicate for the stdout line of the `msg` frame with `seq`. */
function msgLine(seq: number): (line: string) => boolean {
  return (line) => lineFrame(line)?.t === 'msg' && lineFrame(line)?.seq === seq;
}

test('Ctrl-C on pixiu connect: close 1000 bye, exit 0, and a last line {"last_seq", "epoch"} with the last seq it got', { timeout: 60_000 }, async (t) => {
  for (let i = 1; i <= 3; i++) await post('alice', `hello ${i}`);
  const connect = spawnCli(['connect', 'alice', '--device', 'phone', '--url', server.service.url], { PIXIU_JWT_SECRET: JWT_SECRET }, t, { detached: true });
  const welcome = JSON.parse(await connect.line((l) => l.startsWith('{"t":"welcome"'), 'the welcome frame')) as { epoch: string; seq: number };
  assert.equal(welcome.seq, 3);
  await connect.line(msgLine(3), 'msg 3');
  // One more, live, as in the walkthrough.
  assert.equal(await post('alice', 'live!'), 4);
  await connect.line(msgLine(4), 'the live msg 4');
  assert.equal(connect.proc.exitCode, null, 'it keeps running until interrupted');

  // A terminal's Ctrl-C: SIGINT to the whole foreground process group.
  connect.signal('SIGINT', { group: true });
  assert.deepEqual(await connect.exited, { code: 0, signal: null }, connect.stderr());
  assert.equal(connect.stderr(), 'closed 1000 bye\n');
  const lines = connect.lines();
  assert.deepEqual(JSON.parse(lines.at(-1) as string), { last_seq: 4, epoch: welcome.epoch });
  assert.equal(lines.filter((l) => l.startsWith('{"last_seq"')).length, 1, 'printed once');
  const history = await server.client.get('/v1/users/alice/messages');
  assert.equal((history.body as { epoch: string }).epoch, welcome.epoch, "the epoch is the inbox's");
  // It acked what it printed: the device resumes from there without --last-seq.
  const { inbox } = await openInbox(t, redis.url);
  await waitUntil('the ack of seq 4 is kept', async () => (await inbox.cursors('alice')).phone === 4);
});

test('pixiu connect to an inbox that did not exist yet (welcome epoch null) prints the epoch its messages came with; --epoch null is no epoch', { timeout: 60_000 }, async (t) => {
  const connect = spawnCli(['connect', 'newbie', '--device', 'phone', '--url', server.service.url], { PIXIU_JWT_SECRET: JWT_SECRET }, t, { detached: true });
  const welcome = JSON.parse(await connect.line((l) => l.startsWith('{"t":"welcome"'), 'the welcome frame')) as { epoch: string | null };
  assert.equal(welcome.epoch, null, 'no inbox yet');
  await post('newbie', 'first');
  await post('newbie', 'second');
  await connect.line(msgLine(2), 'msg 2');
  connect.signal('SIGINT', { group: true });
  assert.deepEqual(await connect.exited, { code: 0, signal: null }, connect.stderr());
  const history = await server.client.get('/v1/users/newbie/messages');
  const epoch = (history.body as { epoch: string }).epoch;
  assert.equal(typeof epoch, 'string');
  assert.deepEqual(JSON.parse(connect.lines().at(-1) as string), { last_seq: 2, epoch });

  // Resuming as printed by an older run (`--epoch null`): from seq 3, no reset.
  await post('newbie', 'third');
  const again = spawnCli(['connect', 'newbie', '--device', 'phone', '--last-seq', '2', '--epoch', 'null', '--count', '1', '--url', server.service.url], { PIXIU_JWT_SECRET: JWT_SECRET }, t);
  assert.deepEqual(await again.exited, { code: 0, signal: null }, again.stderr());
  const frames = again.lines().filter((l) => l.startsWith('{"t"')).map((l) => JSON.parse(l) as { t: string; seq?: number });
  assert.deepEqual(frames.map((f) => (f.t === 'msg' ? `msg ${f.seq}` : f.t)), ['welcome', 'msg 3']);
});

test('pixiu connect prints a gap with its reason: a message whose ttl passed before it connected is a gap of reason expired', { timeout: 60_000 }, async (t) => {
  const answer = await server.client.post('/v1/messages', { to: 'gina', type: 'chat.text', data: { text: 'soon gone' }, ttl: 1 });
  assert.equal(answer.status, 201, answer.text);
  const expiring = answer.body as { id: string };
  await waitUntil('the 1 s message expired (GET /v1/messages/{id} is 404)',
    async () => (await server.client.get(`/v1/messages/${expiring.id}`)).status === 404, 5000);
  assert.equal(await post('gina', 'kept'), 2);
  const connect = spawnCli(['connect', 'gina', '--device', 'phone', '--count', '1', '--url', server.service.url], { PIXIU_JWT_SECRET: JWT_SECRET }, t);
  assert.deepEqual(await connect.exited, { code: 0, signal: null }, connect.stderr());
  const gap = connect.lines().find((l) => lineFrame(l)?.t === 'gap');
  assert.deepEqual(gap && JSON.parse(gap), { t: 'gap', from: 1, to: 1, reason: 'expired' }, connect.lines().join('\n'));
  assert.deepEqual(JSON.parse(connect.lines().at(-1) as string).last_seq, 2);
});

test('pixiu connect closed by the server (replaced by the same device, 4002) exits 1, still printing where to resume', { timeout: 60_000 }, async (t) => {
  assert.equal(await post('bruno', 'one'), 1);
  const first = spawnCli(['connect', 'bruno', '--device', 'phone', '--url', server.service.url], { PIXIU_JWT_SECRET: JWT_SECRET }, t);
  const welcome = JSON.parse(await first.line((l) => l.startsWith('{"t":"welcome"'), 'the welcome frame')) as { epoch: string };
  await first.line(msgLine(1), 'msg 1');
  // The same device again, through a ws:// URL (the same service).
  const second = spawnCli(['connect', 'bruno', '--device', 'phone', '--url', server.service.url.replace(/^http/, 'ws')], { PIXIU_JWT_SECRET: JWT_SECRET }, t);
  await second.line((l) => l.startsWith('{"t":"welcome"'), 'the second welcome frame');
  assert.deepEqual(await first.exited, { code: 1, signal: null }, first.stderr());
  assert.match(first.stderr(), /^closed 4002 replaced by a new connection of the same device\n$/);
  assert.deepEqual(JSON.parse(first.lines().at(-1) as string), { last_seq: 1, epoch: welcome.epoch });
  second.signal('SIGINT');
  assert.deepEqual(await second.exited, { code: 0, signal: null }, second.stderr());
});

test('pixiu connect --url with another scheme, not a URL, or with a query, exits 1 naming --url; --port 0 exits 1 naming it', async () => {
  for (const [url, run] of await runEach(['ftp://127.0.0.1:8080', 'not a url', 'http://127.0.0.1:8080/?device=x', 'http://127.0.0.1:8080/#top'], (url) => runCli(['connect', 'cleo', '--url', url], { PIXIU_JWT_SECRET: JWT_SECRET }))) {
    assert.equal(run.code, 1, url);
    assert.match(run.stderr, /invalid --url/, url);
  }
  const zero = await runCli(['connect', 'cleo', '--port', '0'], { PIXIU_JWT_SECRET: JWT_SECRET });
  assert.equal(zero.code, 1, zero.stderr);
  assert.match(zero.stderr, /--port 0 \(or PIXIU_PORT=0\) names no service to connect to/);
});

test('pixiu connect --url with a path connects under it, as behind a proxy that serves Pixiu at a prefix', { timeout: 60_000 }, async (t) => {
  // Not Pixiu: a server that records the request line and refuses it.
  const lines: string[] = [];
  const other = createServer((socket) => {
    socket.on('error', () => undefined);
    socket.once('data', (chunk: Buffer) => {
      lines.push(chunk.toString('latin1').split('\r\n')[0] ?? '');
      socket.end('HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
    });
  });
  await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => other.close(() => resolve())));
  const { port } = other.address() as AddressInfo;
  for (const url of [`http://127.0.0.1:${port}/pixiu`, `ws://127.0.0.1:${port}/pixiu/`]) {
    const run = await runCli(['connect', 'kai', '--device', 'tab', '--url', url], { PIXIU_JWT_SECRET: JWT_SECRET });
    assert.equal(run.code, 1, run.stderr);
  }
  assert.equal(lines.length, 2);
  for (const line of lines) assert.match(line, /^GET \/pixiu\/v1\/connect\?device=tab HTTP\/1\.1$/);
});

test('pixiu connect refused by a server that keeps the connection alive exits 1 all the same', { timeout: 60_000 }, async (t) => {
  // Not Pixiu (whose refusals close the connection): a 404 that keeps the socket open.
  const sockets = new Set<Socket>();
  const other = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    const page = '<html><body><h1>404 Not Found</h1></body></html>';
    socket.once('data', () => socket.write(`HTTP/1.1 404 Not Found\r\ncontent-type: text/html\r\ncontent-length: ${page.length}\r\n\r\n${page}`));
  });
  await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => {
    for (const s of sockets) s.destroy();
    other.close(() => resolve());
  }));
  const { port } = other.address() as AddressInfo;
  const run = await runCli(['connect', 'kai', '--url', `http://127.0.0.1:${port}`], { PIXIU_JWT_SECRET: JWT_SECRET });
  assert.equal(run.code, 1, run.stderr);
  assert.match(run.stderr, /connection refused: HTTP 404 \(text\/html of 48 bytes, not Pixiu's JSON error: is ws:\/\/127\.0\.0\.1:\d+ the Pixiu service\? --port \/ PIXIU_PORT, or --url/);
  assert.doesNotMatch(run.stderr, /<html>/, 'another server\'s page is not printed (walkthrough F2)');
});

test('pixiu connect refused before the upgrade (404), or with nothing listening, exits 1 with one error line: no close, no exit line', async () => {
  // A --url under a path the service does not serve: the handshake is answered 404.
  const refused = await runCli(['connect', 'dora', '--url', `${server.service.url}/not-pixiu`], { PIXIU_JWT_SECRET: JWT_SECRET });
  assert.equal(refused.code, 1, refused.stderr);
  assert.equal(refused.stdout, '');
  assert.match(refused.stderr, /connection refused: HTTP 404 \{"error":\{"code":"NOT_FOUND"/, 'Pixiu\'s own JSON error as it came');
  assert.doesNotMatch(refused.stderr, /closed/);
  // A --last-seq that is no seq is refused before connecting, naming the flag.
  for (const [bad, typo] of await runEach(['abc', '-1', '1.5', '', '007', '9007199254740992'], (bad) => runCli(['connect', 'dora', '--last-seq', bad, '--url', server.service.url], { PIXIU_JWT_SECRET: JWT_SECRET }))) {
    assert.equal(typo.code, 1, typo.stderr);
    assert.equal(typo.stdout, '');
    assert.match(typo.stderr, /invalid --last-seq .*whole number/);
  }
  // A port nothing listens on: one just closed.
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  const nobody = await runCli(['connect', 'dora', '--url', `http://127.0.0.1:${port}`], { PIXIU_JWT_SECRET: JWT_SECRET });
  assert.equal(nobody.code, 1, nobody.stderr);
  assert.equal(nobody.stdout, '');
  assert.match(nobody.stderr, /cannot connect to ws:\/\/127\.0\.0\.1:\d+: .*ECONNREFUSED.* \(nothing listens there: is the service running, and on another port\? --port \/ PIXIU_PORT, or --url\)/);
  assert.doesNotMatch(nobody.stderr, /closed/);
});

test('pixiu connect to a server that accepts the connection and never answers the handshake gives up after 10 s, exit 1, one error line', { timeout: 60_000 }, async (t) => {
  // Reads what comes (so it sees the client go) and never answers.
  const silent = createServer((socket) => socket.resume());
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => silent.close(resolve)));
  const { port } = silent.address() as AddressInfo;
  const started = Date.now();
  const hung = await runCli(['connect', 'dora', '--url', `http://127.0.0.1:${port}`], { PIXIU_JWT_SECRET: JWT_SECRET });
  assert.equal(hung.code, 1, hung.stderr);
  assert.equal(hung.stdout, '');
  assert.match(hung.stderr, /^pixiu: cannot connect to ws:\/\/127\.0\.0\.1:\d+: .*handshake has timed out\n$/);
  assert.ok(Date.now() - started < 20_000, `gave up after ${Date.now() - started} ms`);
});

test('pixiu connect whose stdout reader goes away (| head): no stack, exit 1, nothing acked after it, where it stopped on stderr', { timeout: 60_000 }, async (t) => {
  for (let i = 1; i <= 3; i++) await post('piper', `m${i}`);
  const connect = spawnCli(['connect', 'piper', '--device', 'pipe', '--url', server.service.url], { PIXIU_JWT_SECRET: JWT_SECRET }, t);
  await connect.line(msgLine(3), 'msg 3');
  // The reader stops reading and closes its end: the next line printed fails (EPIPE).
  connect.proc.stdout?.destroy();
  await post('piper', 'after the reader left');
  assert.deepEqual(await connect.exited, { code: 1, signal: null }, connect.stderr());
  assert.match(connect.stderr(), /^stdout closed \(EPIPE\): stopping; the last seq printed and acked was 3\nclosed 1000 output closed\n$/);
  const { inbox } = await openInbox(t, redis.url);
  assert.equal((await inbox.cursors('piper')).pipe, 3, 'seq 4, never printed, is not acked');
});

/** A server socket whose incoming bytes are held back from its WebSocket (see {@link unanswering}). */
interface HeldSocket {
  /** Resolves once bytes from the client (its close frame) are held. */
  readonly arrived: Promise<void>;
  /** Hands the held bytes, and all later ones, to the WebSocket: it answers the close. */
  release(): void;
}

/**
 * Not Pixiu: a WebSocket server at /v1/connect that sends `frames` and then holds back
 * what the client sends (a close from the client gets no answer) until released
 * (`held`), and answers every other request 503.
 * @param then instead of that, what it does with the connection after the frames
 */
async function unanswering(t: CleanupContext, frames: readonly object[], then?: (ws: WebSocket) => void): Promise<{ url: string; held: HeldSocket[] }> {
  const held: HeldSocket[] = [];
  const web = http.createServer((_req, res) => res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"code":"UNAVAILABLE"}}'));
  const wss = new WebSocketServer({ server: web, path: '/v1/connect' });
  wss.on('connection', (ws, req) => {
    for (const f of frames) ws.send(JSON.stringify(f));
    if (then) then(ws);
    else held.push(holdBack(req.socket));
  });
  await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => {
    for (const c of wss.clients) c.terminate();
    wss.close();
    web.close(() => resolve());
  }));
  return { url: `http://127.0.0.1:${(web.address() as AddressInfo).port}`, held };
}

/** Takes `socket`'s incoming bytes away from its `data` listeners (the WebSocket's) until released. */
function holdBack(socket: Socket): HeldSocket {
  const readers = socket.listeners('data') as ((chunk: Buffer) => void)[];
  const chunks: Buffer[] = [];
  let arrive = (): void => undefined;
  const arrived = new Promise<void>((resolve) => { arrive = resolve; });
  socket.removeAllListeners('data');
  socket.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    arrive();
  });
  return {
    arrived,
    release: () => {
      socket.removeAllListeners('data');
      for (const read of readers) socket.on('data', read);
      for (const chunk of chunks) for (const read of readers) read.call(socket, chunk);
    },
  };
}

test('pixiu connect given Ctrl-C again while its close is answered (a repeat: `timeout -s INT` signals the command, then its group): one graceful close, exit 0, the exit line', { timeout: 60_000 }, async (t) => {
  const { url, held } = await unanswering(t, [
    { t: 'welcome', conn: 'c1', epoch: 'E1', seq: 1, resume_from: 1, hb: 25 },
    { t: 'msg', seq: 1, id: '0100000000000001', type: 'x', data: {}, ts: 1 },
  ]);
  const connect = spawnCli(['connect', 'ines', '--url', url], { PIXIU_JWT_SECRET: JWT_SECRET }, t);
  await connect.line(msgLine(1), 'msg 1');
  connect.signal('SIGINT');
  // The first signal was handled: its close frame reached the server. The repeat comes
  // while the close waits for the answer, a little later, as a second sender's would:
  // the rule under test is one of time (a repeat within REPEATED_SIGNAL_MS), and a
  // client that had let go of its handler by then died of it (exit 130).
  await held[0]?.arrived;
  await new Promise((resolve) => setTimeout(resolve, 100));
  connect.signal('SIGINT');
  // The server reads the close now, and answers it.
  for (const h of held) h.release();
  assert.deepEqual(await connect.exited, { code: 0, signal: null }, connect.stderr());
  assert.equal(connect.stderr(), 'closed 1000 bye\n');
  assert.deepEqual(JSON.parse(connect.lines().at(-1) as string), { last_seq: 1, epoch: 'E1' });
});

test('pixiu connect whose close the server never answers: a second Ctrl-C later stops it at once (1006 saying so, exit 1), still printing where to resume', { timeout: 60_000 }, async (t) => {
  const { url } = await unanswering(t, [
    { t: 'welcome', conn: 'c1', epoch: 'E1', seq: 2, resume_from: 1, hb: 25 },
    { t: 'msg', seq: 1, id: '0100000000000001', type: 'x', data: {}, ts: 1 },
    { t: 'msg', seq: 2, id: '0100000000000002', type: 'x', data: {}, ts: 1 },
  ]);
  const connect = spawnCli(['connect', 'jo', '--url', url], { PIXIU_JWT_SECRET: JWT_SECRET }, t);
  await connect.line(msgLine(2), 'msg 2');
  connect.signal('SIGINT');
  // The close handshake waits for an answer that never comes (the client gives up
  // after 5 s); the rule under test is one of time: a repeat after REPEATED_SIGNAL_MS.
  await new Promise((resolve) => setTimeout(resolve, REPEATED_SIGNAL_MS + 200));
  assert.equal(connect.proc.exitCode, null, 'still closing');
  connect.signal('SIGINT');
  assert.deepEqual(await connect.exited, { code: 1, signal: null }, connect.stderr());
  assert.match(connect.stderr(), /^closed 1006 \(stopped again: not waiting for the service to answer the close\)\n$/);
  assert.deepEqual(JSON.parse(connect.lines().at(-1) as string), { last_seq: 2, epoch: 'E1' });
});

test('pixiu connect whose close the server never answers drops the socket after 5 s (1006 saying it gave up waiting, exit 1), still printing where to resume', { timeout: 60_000 }, async (t) => {
  const { url } = await unanswering(t, [
    { t: 'welcome', conn: 'c1', epoch: 'E1', seq: 1, resume_from: 1, hb: 25 },
    { t: 'msg', seq: 1, id: '0100000000000001', type: 'x', data: {}, ts: 1 },
  ]);
  const connect = spawnCli(['connect', 'max', '--url', url], { PIXIU_JWT_SECRET: JWT_SECRET }, t);
  await connect.line(msgLine(1), 'msg 1');
  const began = performance.now();
  connect.signal('SIGINT');
  assert.deepEqual(await connect.exited, { code: 1, signal: null }, connect.stderr());
  // ws alone waits 30 s for the answer.
  assert.ok(performance.now() - began < 15_000, `exited ${Math.round(performance.now() - began)} ms after Ctrl-C`);
  assert.match(connect.stderr(), /^closed 1006 \(the service did not answer the close within 5 s: gave up waiting\)\n$/);
  assert.deepEqual(JSON.parse(connect.lines().at(-1) as string), { last_seq: 1, epoch: 'E1' });
});

test('pixiu connect that cannot learn the epoch of an inbox it was welcomed to without one says so on stderr', { timeout: 60_000 }, async (t) => {
  const { url } = await unanswering(t, [
    { t: 'welcome', conn: 'c1', epoch: null, seq: 0, resume_from: 1, hb: 25 },
    { t: 'msg', seq: 1, id: '0100000000000001', type: 'x', data: {}, ts: 1 },
  ], (ws) => setTimeout(() => ws.close(1001, 'server shutting down'), 100));
  const run = spawnCli(['connect', 'kim', '--url', url], { PIXIU_JWT_SECRET: JWT_SECRET }, t);
  assert.deepEqual(await run.exited, { code: 1, signal: null }, run.stderr());
  assert.match(run.stderr(), /^closed 1001 server shutting down\nepoch unknown: the service could not be asked for it/);
  assert.deepEqual(JSON.parse(run.lines().at(-1) as string), { last_seq: 1, epoch: null });
});

test('pixiu connect welcomed without an epoch takes the one its first msg names (no history lookup needed)', { timeout: 60_000 }, async (t) => {
  // The history route of this server answers 503: only the msg can say the epoch.
  const { url } = await unanswering(t, [
    { t: 'welcome', conn: 'c1', epoch: null, seq: 0, resume_from: 1, hb: 25 },
    { t: 'msg', seq: 1, id: '0100000000000001', type: 'x', data: {}, ts: 1, epoch: 'E7' },
    { t: 'msg', seq: 2, id: '0100000000000002', type: 'x', data: {}, ts: 1 },
  ], (ws) => setTimeout(() => ws.close(1001, 'server shutting down'), 100));
  const run = spawnCli(['connect', 'kai', '--url', url], { PIXIU_JWT_SECRET: JWT_SECRET }, t);
  assert.deepEqual(await run.exited, { code: 1, signal: null }, run.stderr());
  assert.equal(run.stderr(), 'closed 1001 server shutting down\n');
  assert.deepEqual(JSON.parse(run.lines().at(-1) as string), { last_seq: 2, epoch: 'E7' });
});

/** True for the stdout line of a `pub` frame of `channel`. */
function isPub(line: string, channel: string): boolean {
  const frame = lineFrame(line);
  return frame?.t === 'pub' && frame.channel === channel;
}

test('pixiu connect --sub follows the channels once welcomed and prints their pub frames; a pattern or a bad name is refused before connecting', { timeout: 60_000 }, async (t) => {
  const connect = spawnCli(['connect', 'carl', '--sub', 'news.a, news.b', '--url', server.service.url], { PIXIU_JWT_SECRET: JWT_SECRET }, t, { detached: true });
  await connect.line((l) => l.startsWith('{"t":"welcome"'), 'the welcome frame');
  // A subscription is in place a few ms after its `sub` (docs/protocol.md): publish
  // until one arrives; then each channel's next publication is printed.
  let n = 0;
  await waitUntil('a pub frame of news.a is printed', async () => {
    const published = await server.client.post('/v1/channels/news.a/publish', { type: 'note', data: { n: n++ } });
    assert.equal(published.status, 201, published.text);
    return connect.lines().some((l) => isPub(l, 'news.a'));
  }, 10_000, 100);
  assert.equal((await server.client.post('/v1/channels/news.b/publish', { type: 'note', data: { n: 'b' } })).status, 201);
  const pub = JSON.parse(await connect.line((l) => isPub(l, 'news.b'), 'the pub frame of news.b')) as { data: unknown; type: string };
  assert.deepEqual([pub.type, pub.data], ['note', { n: 'b' }]);
  assert.ok(!connect.lines().some((l) => l.startsWith('{"t":"error"')), connect.stdout());
  connect.signal('SIGINT', { group: true });
  assert.deepEqual(await connect.exited, { code: 0, signal: null }, connect.stderr());

  const pattern = await runCli(['connect', 'carl', '--sub', 'news.*', '--url', server.service.url], { PIXIU_JWT_SECRET: JWT_SECRET });
  assert.equal(pattern.code, 1);
  assert.match(pattern.stderr, /invalid --sub entry "news\.\*": .*channel name/);
  const many = await runCli(['connect', 'carl', '--sub', Array.from({ length: 101 }, (_, i) => `c${i}`).join(','), '--url', server.service.url], { PIXIU_JWT_SECRET: JWT_SECRET });
  assert.equal(many.code, 1);
  assert.match(many.stderr, /--sub names 101 channels: a connection follows at most 100/);
  // 100 names of 120 characters: a token no request's headers can carry (431).
  const long = await runCli(['connect', 'carl', '--sub', Array.from({ length: 100 }, (_, i) => `${i}`.padStart(120, 'x')).join(','), '--url', server.service.url], { PIXIU_JWT_SECRET: JWT_SECRET });
  assert.equal(long.code, 1);
  assert.match(long.stderr, /the token for these --sub channels is \d+ bytes: more than a request's headers may carry/);
});

test('pixiu connect --sub of 100 channels follows them all: the subs go in batches under the 64-frame limit, and the pongs that pace them are not printed', { timeout: 60_000 }, async (t) => {
  const channels = Array.from({ length: 100 }, (_, i) => `many.c${i}`);
  const connect = spawnCli(['connect', 'dora', '--sub', channels.join(','), '--url', server.service.url], { PIXIU_JWT_SECRET: JWT_SECRET }, t, { detached: true });
  await connect.line((l) => l.startsWith('{"t":"welcome"'), 'the welcome frame');
  // The last channel is followed once its batch is handled: publish until its pub arrives.
  let n = 0;
  await waitUntil('a pub frame of the 100th channel is printed', async () => {
    assert.equal(connect.proc.exitCode, null, `still connected: ${connect.stderr()}`);
    const published = await server.client.post('/v1/channels/many.c99/publish', { type: 'note', data: { n: n++ } });
    assert.equal(published.status, 201, published.text);
    return connect.lines().some((l) => isPub(l, 'many.c99'));
  }, 15_000, 100);
  assert.deepEqual(connect.lines().filter((l) => lineFrame(l)?.t === 'pong' || lineFrame(l)?.t === 'error'), [], 'no pong, no error printed');
  connect.signal('SIGINT', { group: true });
  assert.deepEqual(await connect.exited, { code: 0, signal: null }, connect.stderr());
});

test('pixiu connect --epoch without --last-seq or empty, --from-latest with --last-seq, or a bad --device, is refused before connecting', async () => {
  const empty = await runCli(['connect', 'lea', '--last-seq', '0', '--epoch', '', '--url', server.service.url], { PIXIU_JWT_SECRET: JWT_SECRET });
  assert.equal(empty.code, 1, empty.stderr);
  assert.equal(empty.stdout, '');
  assert.match(empty.stderr, /^pixiu: --epoch is empty/);
  const epoch = await runCli(['connect', 'lea', '--epoch', 'E1', '--url', server.service.url], { PIXIU_JWT_SECRET: JWT_SECRET });
  assert.equal(epoch.code, 1, epoch.stderr);
  assert.equal(epoch.stdout, '');
  assert.match(epoch.stderr, /^pixiu: --epoch goes with --last-seq/);
  const both = await runCli(['connect', 'lea', '--from-latest', '--last-seq', '3', '--url', server.service.url], { PIXIU_JWT_SECRET: JWT_SECRET });
  assert.equal(both.code, 1, both.stderr);
  assert.match(both.stderr, /^pixiu: --from-latest and --last-seq/);
  // A device name the service would refuse is refused here, named by its flag.
  const device = await runCli(['connect', 'lea', '--device', 'my phone', '--url', server.service.url], { PIXIU_JWT_SECRET: JWT_SECRET });
  assert.equal(device.code, 1, device.stderr);
  assert.match(device.stderr, /^pixiu: invalid --device "my phone": 1–64 characters, each one of A-Z a-z 0-9 \. _ : -/);
});

test('pixiu connect --token connects with a JWT minted elsewhere, with no key of its own; one for another user, not a JWT, or beside --tags is refused before connecting', { timeout: 60_000 }, async (t) => {
  const seq = await post('tina', 'for a token from elsewhere');
  const env = { PIXIU_DATA_DIR: await tempDataDir(t) };
  const key = { kind: 'secret', secret: JWT_SECRET } as const;
  const [tinas, bobs] = await Promise.all([testToken(key, 'tina'), testToken(key, 'bob')]);
  const pem = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
  const foreign = await testToken({ kind: 'secret', secret: 'another-service-hs256-secret-of-32-chars' }, 'tina');
  const tokenFile = path.join(env.PIXIU_DATA_DIR, 'token.txt');
  await writeFile(tokenFile, `Bearer ${tinas}\n`);
  const [run, other, junk, tagged, unsigned, wrongKey, wrongToken, fromFile] = await Promise.all([
    runCli(['connect', 'tina', '--token', tinas, '--count', '1', '--url', server.service.url], env),
    runCli(['connect', 'tina', '--token', bobs, '--url', server.service.url], env),
    runCli(['connect', 'tina', '--token', 'not-a-jwt', '--url', server.service.url], env),
    runCli(['connect', 'tina', '--token', tinas, '--tags', 'vip', '--url', server.service.url], env),
    runCli(['connect', 'tina', '--url', server.service.url], { ...env, PIXIU_JWT_PUBLIC_KEY: pem }),
    runCli(['connect', 'tina', '--url', server.service.url], { ...env, PIXIU_JWT_SECRET: 'another-service-hs256-secret-of-32-chars' }),
    runCli(['connect', 'tina', '--token', foreign, '--url', server.service.url], env),
    runCli(['connect', 'tina', '--token-file', tokenFile, '--count', '1', '--device', 'file', '--url', server.service.url], env),
  ]);
  // The same from a file (as copied from a header), kept out of the process list; a
  // file holding something else is named in the refusal.
  const badFile = path.join(env.PIXIU_DATA_DIR, 'bad-token.txt');
  await writeFile(badFile, 'garbage.garbage.garbage\n');
  const bad = await runCli(['connect', 'tina', '--token-file', badFile, '--url', server.service.url], env);
  assert.equal(bad.code, 1, bad.stderr);
  assert.ok(bad.stderr.startsWith(`pixiu: --token-file ${badFile} is not a JWT (`), bad.stderr);
  assert.equal(fromFile.code, 0, fromFile.stderr);
  assert.ok(fromFile.stdout.split('\n').some(msgLine(seq)), fromFile.stdout);
  // Refused 401, the error says where the key came from, or to check the token given.
  assert.equal(wrongKey.code, 1, wrongKey.stderr);
  assert.match(wrongKey.stderr, /^pixiu: connection refused: HTTP 401 .*invalid token.* \(the token was signed with the key from PIXIU_JWT_SECRET \(--jwt-secret\): does the service use that key\?/);
  assert.equal(wrongToken.code, 1, wrongToken.stderr);
  assert.match(wrongToken.stderr, /^pixiu: connection refused: HTTP 401 .* \(the token given with --token: is it one this service verifies/);
  // Given in a file, the hint names the file, not --token.
  const foreignFile = path.join(env.PIXIU_DATA_DIR, 'foreign-token.txt');
  await writeFile(foreignFile, `${foreign}\n`);
  const wrongFile = await runCli(['connect', 'tina', '--token-file', foreignFile, '--url', server.service.url], env);
  assert.equal(wrongFile.code, 1, wrongFile.stderr);
  assert.ok(wrongFile.stderr.includes(`(the token given with --token-file ${foreignFile}: is it one this service verifies`), wrongFile.stderr);
  // With a public key there is nothing to mint with: the refusal says to use --token.
  assert.equal(unsigned.code, 1, unsigned.stderr);
  assert.match(unsigned.stderr, /^pixiu: cannot sign tokens: .*public key; mint them with your identity provider, and pass one to pixiu connect with --token <jwt>/);
  assert.equal(run.code, 0, run.stderr);
  assert.ok(run.stdout.split('\n').some(msgLine(seq)), run.stdout);
  assert.equal(JSON.parse(run.stdout.trim().split('\n').at(-1) as string).last_seq, seq);
  // Decodable, but in a spelling the service refuses (its last character's unused bits set): refused here, with the service's words.
  const last = tinas.at(-1) as string;
  const abc = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const respelled = await runCli(['connect', 'tina', '--token', `${tinas.slice(0, -1)}${abc[abc.indexOf(last) | 1]}`, '--url', server.service.url], env);
  for (const [refused, why] of [
    [other, /^pixiu: --token is for user "bob", not "tina"/], [junk, /^pixiu: --token is not a JWT/], [tagged, /^pixiu: --tags shapes a minted token/],
    [respelled, /^pixiu: --token is not a JWT as the service takes it \(a JWT is canonical base64url \(RFC 7515 §2, RFC 4648 §3\.5\): the unused bits of the signature's last character are not zero\)/],
  ] as const) {
    assert.equal(refused.code, 1, refused.stderr);
    assert.equal(refused.stdout, '');
    assert.match(refused.stderr, why);
    assert.ok(!refused.stderr.includes(bobs) && !refused.stderr.includes(tinas), 'the token is not shown');
  }
});
