/**
 * Requests that carry an `Upgrade` header but do not become a WebSocket
 * (docs/protocol.md "Upgrade requests that are not a WebSocket"): Node hands their
 * sockets to the `upgrade` event and never closes them itself. Each must get its HTTP
 * answer in the JSON error shape (or the route's normal answer), with
 * `Connection: close`, and then the server closes the socket: the server's open file
 * descriptors come back to where they were. A bad WebSocket handshake on
 * `/v1/connect` is refused with the JSON body too, naming the header. And SIGTERM
 * completes within a bound whatever sockets are open, a WebSocket that never answers
 * the close handshake included.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import net from 'node:net';
import { waitUntil } from '../harness/checks.js';
import { spawnServe, tempDataDir, type CleanupContext, type ServeProcess } from '../harness/pixiu-server.js';
import { lastAnswer, rawRequest, type RawAnswer, type RawOptions } from '../harness/raw-http.js';
import { RedisServer } from '../harness/redis-server.js';
import { testToken } from '../harness/ws-client.js';
import { JWT_KEY, JWT_SECRET } from './gateway-fixture.js';

const KEY = 'dGhlIHNhbXBsZSBub25jZQ==';
const WS_HEADERS = `Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${KEY}\r\n`;

let redis: RedisServer;

before(async () => {
  redis = await RedisServer.start();
});

after(async () => {
  await redis?.destroy();
});

async function serve(t: CleanupContext, prefix: string): Promise<ServeProcess> {
  const dataDir = await tempDataDir(t);
  return spawnServe({
    PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: prefix, PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0',
    PIXIU_API_TOKEN: 'upgrade-sockets-test-api-token', PIXIU_JWT_SECRET: JWT_SECRET, PIXIU_LOG_LEVEL: 'info',
  }, t);
}

/** Open file descriptors of a process (Linux); undefined where /proc is missing. */
async function fdCount(pid: number | undefined): Promise<number | undefined> {
  const dir = `/proc/${pid}/fd`;
  if (pid === undefined || !existsSync(dir)) return undefined;
  return (await readdir(dir)).length;
}

/** Sends `request` on a raw socket and reads until the server closes it (or `waitMs`, 5 s unless given). */
function raw(url: string, request: string, opts: RawOptions = {}): Promise<RawAnswer> {
  return rawRequest(url, request, { waitMs: 5_000, ...opts });
}

/** The error code of a JSON error body. */
function codeOf(body: unknown): string | undefined {
  return (body as { error?: { code?: string } } | undefined)?.error?.code;
}

function messageOf(body: unknown): string {
  return (body as { error?: { message?: string } } | undefined)?.error?.message ?? '';
}

test('upgrade requests that do not become a WebSocket are answered, closed, and leak no socket', { timeout: 90_000 }, async (t) => {
  const proc = await serve(t, 'upgsock:');
  const token = await testToken(JWT_KEY, 'ups');
  const auth = `Authorization: Bearer ${token}\r\n`;
  const variants: Array<{ name: string; request: string; status: number; code?: string; message?: RegExp; header?: RegExp }> = [
    { name: 'POST /v1/connect with WebSocket headers', request: `POST /v1/connect HTTP/1.1\r\nHost: x\r\n${WS_HEADERS}\r\n`, status: 404, code: 'NOT_FOUND' },
    { name: 'an unknown path with Upgrade: websocket', request: `GET /nope HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n`, status: 404, code: 'NOT_FOUND' },
    { name: 'GET /healthz with WebSocket headers (answered normally)', request: `GET /healthz HTTP/1.1\r\nHost: x\r\n${WS_HEADERS}\r\n`, status: 200 },
    { name: 'GET /healthz with Upgrade: h2c (answered normally)', request: 'GET /healthz HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n', status: 200 },
    {
      name: 'POST /v1/messages with a body and Upgrade: h2c (curl --http2 on http://)',
      request: 'POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer upgrade-sockets-test-api-token\r\n'
        + 'Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n'
        + 'Content-Type: application/json\r\nContent-Length: 31\r\n\r\n{"to":"h2","type":"t","data":1}',
      status: 400, code: 'INVALID_REQUEST', message: /a request with a body cannot ask for a protocol upgrade/,
    },
    {
      name: 'POST /v1/messages with a body and Upgrade: h2c, without a token',
      request: 'POST /v1/messages HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n'
        + 'Content-Type: application/json\r\nContent-Length: 31\r\n\r\n{"to":"h2","type":"t","data":1}',
      status: 401, code: 'UNAUTHORIZED',
    },
    { name: 'GET /v1/me/messages with Upgrade: h2c, without a token', request: 'GET /v1/me/messages HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n', status: 401, code: 'UNAUTHORIZED' },
    { name: '/v1/connect without a token', request: `GET /v1/connect HTTP/1.1\r\nHost: x\r\n${WS_HEADERS}\r\n`, status: 401, code: 'UNAUTHORIZED' },
    { name: '/v1/connect with Upgrade: h2c', request: `GET /v1/connect HTTP/1.1\r\nHost: x\r\n${auth}Upgrade: h2c\r\nConnection: Upgrade\r\n\r\n`, status: 400, code: 'INVALID_REQUEST', message: /^Upgrade header must be websocket, not "h2c"$/ },
    // Echoed cut to 100 characters and escaped (src/text-cut.ts quotedText), not whole (up to Node's 16 KiB of
    // headers); the "…" after it is UTF-8, which `raw` reads as latin1.
    {
      name: '/v1/connect with a long Upgrade',
      request: `GET /v1/connect HTTP/1.1\r\nHost: x\r\n${auth}Upgrade: h2c${'x'.repeat(5000)}\r\nConnection: Upgrade\r\n\r\n`,
      status: 400, code: 'INVALID_REQUEST', message: new RegExp(`^Upgrade header must be websocket, not "h2cx{97}"${Buffer.from('…').toString('latin1')}$`),
    },
    {
      name: '/v1/connect with Sec-WebSocket-Version: 99',
      request: `GET /v1/connect HTTP/1.1\r\nHost: x\r\n${auth}Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 99\r\nSec-WebSocket-Key: ${KEY}\r\n\r\n`,
      status: 400, code: 'INVALID_REQUEST', message: /Sec-WebSocket-Version/, header: /^sec-websocket-version: 13$/im,
    },
    {
      // hybi-08, which ws would take: its browsers sent Sec-WebSocket-Origin, which the Origin check does not read.
      name: '/v1/connect with Sec-WebSocket-Version: 8 and Sec-WebSocket-Origin',
      request: `GET /v1/connect HTTP/1.1\r\nHost: x\r\n${auth}Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 8\r\nSec-WebSocket-Origin: https://evil.example\r\nSec-WebSocket-Key: ${KEY}\r\n\r\n`,
      status: 400, code: 'INVALID_REQUEST', message: /^missing or invalid Sec-WebSocket-Version header \(only 13, RFC 6455\)$/, header: /^sec-websocket-version: 13$/im,
    },
    {
      name: '/v1/connect with Sec-WebSocket-Key: zz',
      request: `GET /v1/connect HTTP/1.1\r\nHost: x\r\n${auth}Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: zz\r\n\r\n`,
      status: 400, code: 'INVALID_REQUEST', message: /Sec-WebSocket-Key/,
    },
    {
      name: '/v1/connect over HTTP/1.0',
      request: `GET /v1/connect HTTP/1.0\r\nHost: x\r\n${auth}${WS_HEADERS}\r\n`,
      status: 400, code: 'INVALID_REQUEST', message: /needs HTTP\/1\.1/,
    },
    {
      name: '/v1/connect without Sec-WebSocket-Key',
      request: `GET /v1/connect HTTP/1.1\r\nHost: x\r\n${auth}Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      status: 400, code: 'INVALID_REQUEST', message: /Sec-WebSocket-Key/,
    },
    {
      name: '/v1/connect with a body',
      request: `GET /v1/connect HTTP/1.1\r\nHost: x\r\n${auth}${WS_HEADERS}Content-Length: 5\r\n\r\nhello`,
      status: 400, code: 'INVALID_REQUEST', message: /a request with a body cannot ask for a protocol upgrade/,
    },
    {
      name: '/v1/connect with a bad Sec-WebSocket-Protocol',
      request: `GET /v1/connect HTTP/1.1\r\nHost: x\r\n${auth}${WS_HEADERS}Sec-WebSocket-Protocol: a,,b\r\n\r\n`,
      status: 400, code: 'INVALID_REQUEST', message: /Sec-WebSocket-Protocol/,
    },
  ];

  // Warm up (lazy modules, Redis connections), then take the baseline.
  for (const v of variants) await raw(proc.url, v.request);
  const pid = proc.proc.pid;
  const baseline = await fdCount(pid);

  for (const v of variants) {
    await t.test(v.name, async () => {
      for (const halfClose of [false, true]) {
        const answer = await raw(proc.url, v.request, { halfClose });
        assert.equal(answer.status, v.status, `${answer.head}\n${JSON.stringify(answer.body)}`);
        assert.ok(answer.closedByServer, 'the server closes the connection after its answer');
        assert.match(answer.head, /^connection: close$/im);
        assert.match(answer.head, /^content-type: application\/json/im);
        if (v.code !== undefined) assert.equal(codeOf(answer.body), v.code, JSON.stringify(answer.body));
        if (v.message) assert.match(messageOf(answer.body), v.message);
        if (v.header) assert.match(answer.head, v.header);
      }
    });
  }

  // 50 of each, the client leaving after 300 ms whether or not it read the answer
  // (as in the review's repro): every socket is closed on the server's side too.
  await Promise.all(variants.flatMap((v) => Array.from({ length: 50 }, () => raw(proc.url, v.request, { waitMs: 300 }))));
  if (baseline !== undefined) {
    await waitUntil('the server holds no more sockets than before', async () => (await fdCount(pid) ?? 0) <= baseline);
  }

  const exit = await proc.term();
  assert.deepEqual(exit, { code: 0, signal: null });
  assert.match(proc.stdout(), /"msg":"pixiu stopped"/);
});

test('SIGTERM completes with upgrade sockets open and a WebSocket that never answers the close', { timeout: 60_000 }, async (t) => {
  const proc = await serve(t, 'upgterm:');
  const token = await testToken(JWT_KEY, 'silent');
  const { port, hostname } = new URL(proc.url);
  const open: net.Socket[] = [];
  const closed: Array<Promise<void>> = [];
  const connect = (request: string): Promise<string> => new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(request));
    open.push(socket);
    t.after(() => { socket.destroy(); });
    socket.setEncoding('latin1');
    socket.once('data', (chunk: string) => resolve(chunk));
    socket.on('error', reject);
    // The client never reads on, answers or closes: only the server can end these.
    closed.push(new Promise((done) => socket.once('close', () => done())));
  });
  // A WebSocket that will not answer the 1001 close frame (ws would wait 30 s for it).
  const first = await connect(`GET /v1/connect HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n${WS_HEADERS}\r\n`);
  assert.match(first, /^HTTP\/1\.1 101 /);
  // Upgrade requests answered over HTTP, and one still in flight (headers not complete:
  // Node's parser holds it, not the upgrade event).
  for (let i = 0; i < 10; i++) await connect(`GET /nope HTTP/1.1\r\nHost: x\r\n${WS_HEADERS}\r\n`);
  const partial = net.connect(Number(port), hostname, () => partial.write('GET /healthz HTTP/1.1\r\nHost: x\r\n'));
  t.after(() => { partial.destroy(); });
  partial.on('error', () => undefined);
  closed.push(new Promise((done) => partial.once('close', () => done())));

  const started = Date.now();
  const exit = await proc.term();
  const tookMs = Date.now() - started;
  assert.deepEqual(exit, { code: 0, signal: null });
  assert.match(proc.stdout(), /"msg":"pixiu stopped"/);
  assert.ok(tookMs < 15_000, `SIGTERM took ${tookMs} ms`);
  await Promise.all(closed);
});

test('an upgrade request pipelined behind other requests is answered after them: a refusal with Connection: close, a handshake with 101 and welcome', { timeout: 60_000 }, async (t) => {
  const proc = await serve(t, 'upgpipe:');
  const token = await testToken(JWT_KEY, 'piper');
  const healthz = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n';
  const refused = await raw(proc.url, `${healthz}${healthz}GET /nope HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n`);
  assert.ok(refused.closedByServer, 'the server closes the connection after the last answer');
  const text = refused.text;
  assert.deepEqual([...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]), ['200', '200', '404'], text);
  assert.match(lastAnswer(text), /^connection: close$/im);
  const ws = (await raw(proc.url, `${healthz}GET /v1/connect?device=d HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n${WS_HEADERS}\r\n`, { waitMs: 1_500 })).text;
  assert.deepEqual([...ws.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]), ['200', '101'], ws);
  assert.match(ws, /"t":"welcome"/);
  assert.doesNotMatch(proc.stdout(), /websocket upgrade failed/);
});
