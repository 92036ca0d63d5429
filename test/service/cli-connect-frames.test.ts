/**
 * What `pixiu connect` sends and prints, against a scripted WebSocket server (not
 * Pixiu) that records the frames the client sends and the requests it makes: its acks
 * name the epoch it knows (docs/protocol.md, `ack`), `--no-ack` sends none, `--count`
 * stops printing and acking at the count, `last_seq` follows `resume_from` and never
 * goes back for a redelivered seq, the epoch lookup of the exit line is made only when
 * something was received, under the `--url`'s path prefix, and the token it mints
 * lives 24 h (README) for the uid and the `--sub` channels; a `--token-file`'s
 * "bearer " goes in any case, and a `--token` with no sub is refused as for no user; a
 * 401 names the data dir's key file, another refusal no token at all; a Ctrl-C during
 * the handshake stops it at once, saying so.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import path from 'node:path';
import { mkdir, writeFile } from 'node:fs/promises';
import { runCli, tempDataDir, type CleanupContext } from '../harness/pixiu-server.js';
import { testToken } from '../harness/ws-client.js';
import { spawnCli } from '../harness/cli-process.js';

const JWT_SECRET = 'cli-connect-frames-hs256-secret-of-32-chars';
const env = { PIXIU_JWT_SECRET: JWT_SECRET };

/** What the scripted server saw. */
interface Seen {
  /** The frames the client sent, parsed. */
  readonly frames: Array<Record<string, unknown>>;
  /** The upgrade request's path and query, and its Authorization header. */
  readonly upgrades: Array<{ url: string; authorization: string | undefined }>;
  /** The plain HTTP requests' path and query, and their Authorization header. */
  readonly requests: Array<{ url: string; authorization: string | undefined }>;
}

/**
 * Not Pixiu: a WebSocket server at `<prefix>/v1/connect` that sends `frames` to each
 * connection and then does `then` with it (nothing: the client closes); a plain request
 * is answered by `answer`, else 503.
 */
async function scripted(t: CleanupContext, frames: readonly object[], opts: {
  then?: (ws: WebSocket) => void;
  prefix?: string;
  answer?: (req: http.IncomingMessage, res: http.ServerResponse) => boolean;
} = {}): Promise<{ url: string; seen: Seen }> {
  const seen: Seen = { frames: [], upgrades: [], requests: [] };
  const web = http.createServer((req, res) => {
    seen.requests.push({ url: req.url ?? '', authorization: req.headers.authorization });
    if (opts.answer?.(req, res) !== true) res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"code":"UNAVAILABLE"}}');
  });
  const wss = new WebSocketServer({ server: web, path: `${opts.prefix ?? ''}/v1/connect` });
  wss.on('connection', (ws, req) => {
    seen.upgrades.push({ url: req.url ?? '', authorization: req.headers.authorization });
    ws.on('message', (data) => seen.frames.push(JSON.parse(data.toString()) as Record<string, unknown>));
    for (const f of frames) ws.send(JSON.stringify(f));
    opts.then?.(ws);
  });
  await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => {
    for (const c of wss.clients) c.terminate();
    wss.close();
    web.close(() => resolve());
  }));
  return { url: `http://127.0.0.1:${(web.address() as AddressInfo).port}${opts.prefix ?? ''}`, seen };
}

/** The server's close of a shutdown, a little after the frames. */
const shutDown = (ws: WebSocket): void => {
  setTimeout(() => ws.close(1001, 'server shutting down'), 100);
};

/** The frames printed on stdout (not the exit line), as `t seq` (a gap: `gap to reason`). */
function printed(stdout: string): string[] {
  return stdout.trim().split('\n').slice(0, -1).map((l) => {
    const f = JSON.parse(l) as { t: string; seq?: number; to?: number; reason?: string };
    return f.t === 'msg' ? `msg ${f.seq}` : f.t === 'gap' ? `gap ${f.to} ${f.reason}` : f.t;
  });
}

/** The exit line. */
function exitLine(stdout: string): unknown {
  return JSON.parse(stdout.trim().split('\n').at(-1) as string);
}

const welcome = (epoch: string | null, seq: number, resumeFrom: number): object => ({ t: 'welcome', conn: 'c1', user: 'u', device: 'cli', epoch, seq, resume_from: resumeFrom, heartbeat: 25 });
const msg = (seq: number, extra: object = {}): object => ({ t: 'msg', seq, id: `01000000000000${String(seq).padStart(2, '0')}`, type: 'x', data: {}, ts: 1, ...extra });

test('pixiu connect acks each msg and gap printed with the epoch it knows; a redelivered seq moves no last_seq back; --count stops printing and acking at the count', async (t) => {
  const { url, seen } = await scripted(t, [
    welcome('E1', 3, 1), msg(1), msg(2),
    // A redelivery round: what was not acked yet comes again.
    { t: 'gap', from: 1, to: 1, reason: 'expired', redelivered: true }, msg(1, { redelivered: true }),
    // Past --count 3: neither printed nor acked.
    msg(3),
  ]);
  const run = await runCli(['connect', 'uma', '--count', '3', '--url', url], env);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.stderr, 'closed 1000 done\n');
  assert.deepEqual(printed(run.stdout), ['welcome', 'msg 1', 'msg 2', 'gap 1 expired', 'msg 1']);
  assert.deepEqual(exitLine(run.stdout), { last_seq: 2, epoch: 'E1' });
  assert.deepEqual(seen.frames, [
    { t: 'ack', seq: 1, epoch: 'E1' }, { t: 'ack', seq: 2, epoch: 'E1' },
    { t: 'ack', seq: 1, epoch: 'E1' }, { t: 'ack', seq: 1, epoch: 'E1' },
  ]);
});

test('pixiu connect welcomed with no epoch acks with the one its first msg names, from that msg on; --no-ack sends no ack at all', async (t) => {
  const { url, seen } = await scripted(t, [welcome(null, 0, 1), msg(1, { epoch: 'E7' }), msg(2)]);
  const run = await runCli(['connect', 'vic', '--count', '2', '--url', url], env);
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(exitLine(run.stdout), { last_seq: 2, epoch: 'E7' });
  assert.deepEqual(seen.frames, [{ t: 'ack', seq: 1, epoch: 'E7' }, { t: 'ack', seq: 2, epoch: 'E7' }]);

  const quiet = await scripted(t, [welcome('E2', 2, 1), msg(1), msg(2)]);
  const noAck = await runCli(['connect', 'vic', '--no-ack', '--count', '2', '--url', quiet.url], env);
  assert.equal(noAck.code, 0, noAck.stderr);
  assert.deepEqual(printed(noAck.stdout), ['welcome', 'msg 1', 'msg 2']);
  // README: with --no-ack, last_seq is still the last seq it received.
  assert.deepEqual(exitLine(noAck.stdout), { last_seq: 2, epoch: 'E2' });
  assert.deepEqual(quiet.seen.frames, [], 'no ack sent');
});

test('pixiu connect closed before any msg prints last_seq resume_from - 1, and asks for no epoch when it received nothing', async (t) => {
  // Resumed at 6 (5 acked before): nothing came before the close.
  const resumed = await scripted(t, [welcome('E3', 9, 6)], { then: shutDown });
  const run = await runCli(['connect', 'wes', '--url', resumed.url], env);
  assert.equal(run.code, 1, run.stderr);
  assert.equal(run.stderr, 'closed 1001 server shutting down\n');
  assert.deepEqual(exitLine(run.stdout), { last_seq: 5, epoch: 'E3' });

  // No inbox yet and nothing received: no epoch to look up, and none looked up.
  const fresh = await scripted(t, [welcome(null, 0, 1)], { then: shutDown });
  const empty = await runCli(['connect', 'wes', '--url', fresh.url], env);
  assert.equal(empty.code, 1, empty.stderr);
  assert.equal(empty.stderr, 'closed 1001 server shutting down\n');
  assert.deepEqual(exitLine(empty.stdout), { last_seq: 0, epoch: null });
  assert.deepEqual(fresh.seen.requests, [], 'no history request');
});

test('pixiu connect looks the epoch up under the --url path, with its token and the last seq, when only gaps came after a welcome with no epoch', async (t) => {
  const { url, seen } = await scripted(t, [welcome(null, 2, 1), { t: 'gap', from: 1, to: 2, reason: 'trimmed' }], {
    then: shutDown,
    prefix: '/pixiu',
    answer: (req, res) => {
      if (!(req.url ?? '').startsWith('/pixiu/v1/me/messages?')) return false;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ epoch: 'E9', first_seq: 1, latest_seq: 2, next_after_seq: 2, messages: [] }));
      return true;
    },
  });
  const run = await runCli(['connect', 'xia', '--url', url], env);
  assert.equal(run.code, 1, run.stderr);
  assert.equal(run.stderr, 'closed 1001 server shutting down\n');
  assert.deepEqual(exitLine(run.stdout), { last_seq: 2, epoch: 'E9' });
  assert.equal(seen.upgrades.length, 1);
  assert.deepEqual(seen.requests, [{ url: '/pixiu/v1/me/messages?after_seq=2&limit=1', authorization: seen.upgrades[0]?.authorization }]);
});

test('pixiu connect mints a token for the uid that lives 24 h and allows exactly the --sub channels', async (t) => {
  const { url, seen } = await scripted(t, [welcome('E4', 0, 1)], { then: shutDown });
  const run = await runCli(['connect', 'yan', '--sub', 'news.a,news.b,news.a', '--url', url], env);
  assert.equal(run.code, 1, run.stderr);
  const authorization = seen.upgrades[0]?.authorization ?? '';
  assert.match(authorization, /^Bearer [\w-]+\.[\w-]+\.[\w-]+$/);
  const claims = JSON.parse(Buffer.from(authorization.split('.')[1] ?? '', 'base64url').toString()) as { sub: string; iat: number; exp: number; channels: string[] };
  assert.equal(claims.sub, 'yan');
  assert.equal(claims.exp - claims.iat, 24 * 3600);
  assert.deepEqual(claims.channels, ['news.a', 'news.b']);
  assert.deepEqual(seen.frames.filter((f) => f.t === 'sub').map((f) => f.channel), ['news.a', 'news.b']);
});

test('pixiu connect --url https:// or wss:// connects over wss://', async () => {
  // A port nothing listens on: one just closed.
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  for (const scheme of ['https', 'wss']) {
    const run = await runCli(['connect', 'zoe', '--url', `${scheme}://127.0.0.1:${port}`], env);
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stderr, new RegExp(`^pixiu: cannot connect to wss://127\\.0\\.0\\.1:${port}: `), scheme);
  }
});

test('pixiu connect --token-file drops a leading "bearer " in any case, and a first line of blanks holds no token; a --token with no sub is refused as for no user', async (t) => {
  const dir = await tempDataDir(t);
  const token = await testToken({ kind: 'secret', secret: JWT_SECRET }, 'amy');
  const [lower, blank] = [path.join(dir, 'lower.txt'), path.join(dir, 'blank.txt')];
  await writeFile(lower, `bearer ${token}\n`);
  await writeFile(blank, ` \t \n${token}\n`);
  const { url, seen } = await scripted(t, [welcome('E5', 0, 1)], { then: shutDown });
  // No key of its own: the token given is the only one.
  const none = { PIXIU_DATA_DIR: dir };
  const fromLower = await runCli(['connect', 'amy', '--token-file', lower, '--url', url], none);
  assert.equal(fromLower.code, 1, fromLower.stderr);
  assert.equal(fromLower.stderr, 'closed 1001 server shutting down\n');
  assert.deepEqual(seen.upgrades.map((u) => u.authorization), [`Bearer ${token}`]);

  const fromBlank = await runCli(['connect', 'amy', '--token-file', blank, '--url', url], none);
  assert.equal(fromBlank.code, 1, fromBlank.stderr);
  assert.equal(fromBlank.stdout, '');
  assert.equal(fromBlank.stderr, `pixiu: --token-file ${blank} holds no token on its first line\n`);

  // Decoded, not verified: the claims of a JWT with no sub.
  const part = (o: object): string => Buffer.from(JSON.stringify(o)).toString('base64url');
  const subless = `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ exp: Math.floor(Date.now() / 1000) + 3600 })}.c2ln`;
  const noSub = await runCli(['connect', 'amy', '--token', subless, '--url', url], none);
  assert.equal(noSub.code, 1, noSub.stderr);
  assert.equal(noSub.stdout, '');
  assert.equal(noSub.stderr, 'pixiu: --token is for no user (no sub claim), not "amy": give the uid the token was issued to\n');
  assert.equal(seen.upgrades.length, 1, 'neither connected');
});

/** A stand-in for Pixiu's refusals: answers every request `status` with `body` as its JSON error body (docs/api.md, "Errors"), and closes. */
async function refusing(t: CleanupContext, status: string, body: string): Promise<string> {
  const web = createServer((socket) => {
    socket.on('error', () => undefined);
    socket.once('data', () => socket.end(`HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`));
  });
  await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => web.close(() => resolve())));
  return `http://127.0.0.1:${(web.address() as AddressInfo).port}`;
}

test('pixiu connect refused 401 with a token signed by the data dir\'s key names that key\'s file; a refusal other than 401 gets no token hint', async (t) => {
  const dir = await tempDataDir(t);
  await mkdir(path.join(dir, 'secrets'), { mode: 0o700 });
  await writeFile(path.join(dir, 'secrets', 'jwt-secret'), `${JWT_SECRET}\n`, { mode: 0o600 });
  const invalidToken = '{"error":{"code":"UNAUTHORIZED","message":"invalid token"}}';
  const unauthorized = await runCli(['connect', 'bea', '--url', await refusing(t, '401 Unauthorized', invalidToken)], { PIXIU_DATA_DIR: dir });
  assert.equal(unauthorized.code, 1, unauthorized.stderr);
  assert.equal(unauthorized.stderr, `pixiu: connection refused: HTTP 401 ${invalidToken} (the token was signed with the key from ${path.join(dir, 'secrets', 'jwt-secret')}: does the service use that key? Give pixiu connect the service's --data-dir, or its PIXIU_JWT_SECRET)\n`);
  const notAllowed = '{"error":{"code":"FORBIDDEN","message":"origin not allowed"}}';
  const forbidden = await runCli(['connect', 'bea', '--url', await refusing(t, '403 Forbidden', notAllowed)], { PIXIU_DATA_DIR: dir });
  assert.equal(forbidden.code, 1, forbidden.stderr);
  assert.equal(forbidden.stderr, `pixiu: connection refused: HTTP 403 ${notAllowed}\n`);
});

test('pixiu connect interrupted (Ctrl-C) while its handshake waits stops at once: exit 1, one line saying so, no exit line', async (t) => {
  // Reads what comes and never answers.
  let reached = (): void => undefined;
  const connected = new Promise<void>((resolve) => { reached = resolve; });
  const silent = createServer((socket) => {
    socket.resume();
    reached();
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => silent.close(resolve)));
  const connect = spawnCli(['connect', 'cyd', '--url', `http://127.0.0.1:${(silent.address() as AddressInfo).port}`], env, t);
  await connected;
  const began = performance.now();
  connect.signal('SIGINT');
  assert.deepEqual(await connect.exited, { code: 1, signal: null }, connect.stderr());
  assert.equal(connect.stderr(), 'pixiu: interrupted before the connection was open\n');
  assert.equal(connect.stdout(), '');
  // The handshake's own limit is 10 s.
  assert.ok(performance.now() - began < 5000, `exited ${Math.round(performance.now() - began)} ms after Ctrl-C`);
});
