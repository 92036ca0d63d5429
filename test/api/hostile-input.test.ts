/**
 * Input that is valid JSON but hostile, and requests Node's HTTP parser refuses, are
 * answered with the documented `{"error": {"code", "message"}}` body and an honest
 * message (docs/api.md, "Errors" and "Input rules"), and store nothing:
 * - `data` nested deeper than MAX_DATA_DEPTH, on every path that takes data (single,
 *   batch item, room, broadcast, channel publish);
 * - `__proto__` / `constructor.prototype` keys;
 * - malformed HTTP (request line, Content-Length, CL+TE, garbage after the body,
 *   headers over the limit), over a raw socket;
 * - 16-hex-digit ids that are not MsgIDs say what is wrong with them.
 */
import { after, before, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { MAX_BODY_DEPTH } from '../../src/api/body-depth.js';
import { MAX_DATA_DEPTH } from '../../src/store/data-depth.js';
import { assertFirstMinted, expectError, metricSample } from '../harness/checks.js';
import { RedisServer } from '../harness/redis-server.js';
import type { ConfigOverrides } from '../../src/config/config.js';
import { PixiuClient, startInProcess, type InProcessServer } from '../harness/pixiu-server.js';
import { testToken } from '../harness/ws-client.js';
import { ACK_BODY_BYTES } from '../../src/gateway/me-routes.js';

let redis: RedisServer;
let prefixes = 0;

before(async () => {
  redis = await RedisServer.start();
});

after(async () => {
  await redis?.destroy();
});

async function freshServer(t: TestContext, overrides: ConfigOverrides = {}): Promise<InProcessServer> {
  return startInProcess(t, { redisUrl: redis.url, partitions: '1', redisPrefix: `hostile${++prefixes}:`, storeDurability: 'relaxed', ...overrides });
}

/** JSON text of `depth` nested arrays around 1, built as text (no recursion). */
function nestedJson(depth: number): string {
  return `${'['.repeat(depth)}1${']'.repeat(depth)}`;
}

/** A message body with `data` nested `depth` levels, as raw JSON text. */
function deepMessage(depth: number, extra = '"to":"poison"'): string {
  return `{${extra},"type":"x","data":${nestedJson(depth)}}`;
}

/** The next message stored gets the first counter past the start's time floor: nothing was stored before. */
async function assertNothingStored(server: InProcessServer): Promise<void> {
  const good = await server.client.post('/v1/messages', { to: 'poison', type: 'x', data: 'good' });
  assert.equal(good.status, 201, good.text);
  assertFirstMinted((good.body as { id: string }).id, 'nothing was stored before', server);
}

const TOO_DEEP = new RegExp(`data nests deeper than ${MAX_DATA_DEPTH} levels`);
const BODY_TOO_DEEP = new RegExp(`^the JSON body nests deeper than ${MAX_BODY_DEPTH} levels`);

test('data nested deeper than the limit is 400 INVALID_REQUEST at every depth, and nothing is stored', async (t) => {
  // 2,000,000 levels are a 4 MB body: the body limit (1 MiB by default) above it, so the depth is what refuses it.
  const server = await freshServer(t, { maxBodyBytes: String(8 * 1024 * 1024) });
  // The body (one object around data) nests one level more than its data: MAX_BODY_DEPTH
  // levels are parsed and told about data; one more is refused unparsed, the body named.
  for (const depth of [MAX_DATA_DEPTH + 1, MAX_BODY_DEPTH - 1]) {
    const answer = await server.client.post('/v1/messages', deepMessage(depth));
    expectError(answer, 400, 'INVALID_REQUEST', TOO_DEEP);
  }
  for (const depth of [MAX_BODY_DEPTH, 5000, 100_000, 2_000_000]) {
    const answer = await server.client.post('/v1/messages', deepMessage(depth));
    expectError(answer, 400, 'INVALID_REQUEST', BODY_TOO_DEEP);
    assert.doesNotMatch(answer.text, /call stack|serialisable/);
  }
  await assertNothingStored(server);
  // Brackets inside strings are not levels, escaped quotes or not.
  const brackets = '['.repeat(3 * MAX_BODY_DEPTH);
  for (const data of [brackets, `\\"${brackets}`, `\\${brackets}`, `\\\\"${brackets}`]) {
    const stored = await server.client.post('/v1/messages', { to: 'poison', type: 'x', data });
    assert.equal(stored.status, 201, stored.text.slice(0, 300));
  }
  // After a string ending in an escaped backslash, brackets count again.
  const afterString = `{"to":"poison","type":"x","data":["a\\\\",${nestedJson(MAX_BODY_DEPTH)}]}`;
  expectError(await server.client.post('/v1/messages', afterString), 400, 'INVALID_REQUEST', BODY_TOO_DEEP);
  const atLimit = await server.client.post('/v1/messages', deepMessage(MAX_DATA_DEPTH));
  assert.equal(atLimit.status, 201, atLimit.text);
});

test('a body with many objects or arrays side by side is flat, not deep: thousands of siblings are accepted', async (t) => {
  const server = await freshServer(t);
  const many = 3 * MAX_BODY_DEPTH;
  for (const [what, data] of [['objects', Array.from({ length: many }, () => ({}))], ['arrays', Array.from({ length: many }, () => [])]] as const) {
    const stored = await server.client.post('/v1/messages', { to: 'flat', type: 'x', data });
    assert.equal(stored.status, 201, `${what}: ${stored.text.slice(0, 300)}`);
  }
});

test('a too-deep batch item fails alone; room, broadcast and channel data are held to the same depth', async (t) => {
  const server = await freshServer(t);
  const batch = await server.client.post('/v1/messages/batch',
    `{"messages":[{"to":"poison","type":"x","data":"ok"},${deepMessage(900)},{"to":"poison","type":"x","data":"ok too"}]}`);
  assert.equal(batch.status, 200, batch.text);
  const results = (batch.body as { results: { status: number; error?: { code: string; message: string } }[] }).results;
  assert.deepEqual(results.map((r) => r.status), [201, 400, 201]);
  assert.equal(results[1]?.error?.code, 'INVALID_REQUEST');
  assert.match(results[1]?.error?.message ?? '', TOO_DEEP);

  const joined = await server.client.request('PUT', '/v1/rooms/deep-room/members', { body: { users: ['poison'] } });
  assert.equal(joined.status, 200, joined.text);
  expectError(await server.client.post('/v1/messages', deepMessage(900, '"room":"deep-room"')), 400, 'INVALID_REQUEST', TOO_DEEP);
  expectError(await server.client.post('/v1/broadcast', `{"type":"x","data":${nestedJson(900)}}`), 400, 'INVALID_REQUEST', TOO_DEEP);
  expectError(await server.client.post('/v1/channels/deep.chan/publish', `{"type":"x","data":${nestedJson(900)}}`),
    400, 'INVALID_REQUEST', TOO_DEEP);
  // A batch item deeper than a body may be fails the batch whole: the body is not parsed.
  const tooDeep = await server.client.post('/v1/messages/batch', `{"messages":[{"to":"poison","type":"x","data":"ok"},${deepMessage(MAX_BODY_DEPTH)}]}`);
  expectError(tooDeep, 400, 'INVALID_REQUEST', BODY_TOO_DEEP);
});

test('__proto__ and constructor.prototype keys are refused as such, not as invalid JSON', async (t) => {
  const server = await freshServer(t);
  for (const data of ['{"__proto__":1}', '{"constructor":{"prototype":1}}', '[{"a":{"__proto__":{"x":1}}}]']) {
    const answer = await server.client.post('/v1/messages', `{"to":"poison","type":"x","data":${data}}`);
    expectError(answer, 400, 'INVALID_REQUEST', /^keys named __proto__ or constructor\.prototype are not accepted$/);
  }
  expectError(await server.client.post('/v1/messages', '{"to":"poison","type":"x","data":'), 400, 'INVALID_REQUEST', /not valid JSON/);
  const fine = await server.client.post('/v1/messages', '{"to":"poison","type":"x","data":{"constructor":"c"}}');
  assert.equal(fine.status, 201, fine.text);

  // In a batch the item holding one fails alone, like any invalid item; the others go through.
  const batch = await server.client.post('/v1/messages/batch', '{"messages":[{"to":"poison","type":"x","data":"a"},'
    + '{"to":"poison","type":"x","data":{"__proto__":{"admin":true}}},{"to":"poison","type":"x","data":[{"constructor":{"prototype":1}}]},'
    + '{"to":"poison","type":"x","data":"b"}]}');
  assert.equal(batch.status, 200, batch.text);
  const results = (batch.body as { results: { status: number; error?: { code: string; message: string } }[] }).results;
  assert.deepEqual(results.map((r) => r.status), [201, 400, 400, 201], batch.text);
  assert.equal(results[1]?.error?.message, 'messages/1: keys named __proto__ or constructor.prototype are not accepted');
  assert.equal(results[2]?.error?.message, 'messages/2: keys named __proto__ or constructor.prototype are not accepted');
  const history = await server.client.get('/v1/users/poison/messages');
  assert.deepEqual((history.body as { messages: { data: unknown }[] }).messages.map((m) => m.data), [{ constructor: 'c' }, 'a', 'b']);
  // Outside the items, the whole body is refused.
  expectError(await server.client.post('/v1/messages/batch', '{"__proto__":{},"messages":[{"to":"poison","type":"x","data":"c"}]}'),
    400, 'INVALID_REQUEST', /^keys named __proto__ or constructor\.prototype are not accepted$/);
});

/** Writes `request` on a raw socket and reads until the server closes it. */
function rawExchange(url: string, request: string | Buffer): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(request));
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
  });
}

/** The last response on a raw exchange: status and parsed JSON body. */
function lastResponse(text: string): { status: number; head: string; body: unknown } {
  // The last status line (a message may name HTTP/1.1 too, never with a status after it).
  const at = [...text.matchAll(/HTTP\/1\.1 \d{3} /g)].at(-1)?.index ?? -1;
  const response = text.slice(at);
  const split = response.indexOf('\r\n\r\n');
  const head = response.slice(0, split);
  return { status: Number(response.slice(9, 12)), head, body: JSON.parse(response.slice(split + 4)) };
}

test('requests the HTTP parser refuses get the JSON error body and Connection: close', async (t) => {
  const server = await freshServer(t);
  const auth = `Authorization: Bearer ${server.client.token}\r\n`;
  const cases: { name: string; request: string; status: number; code: string }[] = [
    { name: 'malformed request line', request: 'GARBAGE\r\n\r\n', status: 400, code: 'INVALID_REQUEST' },
    { name: 'Content-Length: abc', request: `POST /v1/messages HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: abc\r\n\r\n{}`, status: 400, code: 'INVALID_REQUEST' },
    {
      name: 'Content-Length and Transfer-Encoding',
      request: `POST /v1/messages HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`,
      status: 400, code: 'INVALID_REQUEST',
    },
    { name: 'garbage after the body', request: 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n\x01\x02 not a request\r\n\r\n', status: 400, code: 'INVALID_REQUEST' },
    { name: 'no Host header', request: 'GET /healthz HTTP/1.1\r\n\r\n', status: 400, code: 'INVALID_REQUEST' },
    { name: 'no HTTP version', request: 'GET /healthz\r\n\r\n', status: 400, code: 'INVALID_REQUEST' },
    { name: 'no HTTP version, with a body', request: `POST /v1/messages\r\n${auth}Content-Type: application/json\r\nContent-Length: 32\r\n\r\n{"to":"u","type":"t","data":1} `, status: 400, code: 'INVALID_REQUEST' },
    { name: 'HTTP/2.0 as text', request: 'GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n', status: 400, code: 'INVALID_REQUEST' },
    { name: 'two Host headers', request: 'GET /healthz HTTP/1.1\r\nHost: a.example\r\nhost: b.example\r\n\r\n', status: 400, code: 'INVALID_REQUEST' },
    {
      name: 'an Expect other than 100-continue',
      request: `POST /v1/messages HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nExpect: foo\r\nContent-Length: 2\r\n\r\n{}`,
      status: 417, code: 'EXPECTATION_FAILED',
    },
    { name: 'a 100 KB URL', request: `GET /v1/messages/${'a'.repeat(100_000)} HTTP/1.1\r\nHost: x\r\n\r\n`, status: 431, code: 'HEADERS_TOO_LARGE' },
  ];
  for (const c of cases) {
    const { status, head, body } = lastResponse(await rawExchange(server.service.url, c.request));
    assert.equal(status, c.status, c.name);
    assert.match(head, /\r\nconnection: close/i, c.name);
    assert.match(head, /\r\ncontent-type: application\/json/i, c.name);
    const error = (body as { error?: { code?: string; message?: string } }).error;
    assert.equal(error?.code, c.code, `${c.name}: ${JSON.stringify(body)}`);
    assert.equal(typeof error?.message, 'string', c.name);
    assert.deepEqual(Object.keys(body as object), ['error'], c.name);
  }
  // The server still answers.
  assert.equal((await server.client.get('/healthz')).status, 200);
  assert.deepEqual(await errorCounts(server, 'EXPECTATION_FAILED'), { http: 1, ingest: 1 }, 'the 417 of a message is counted as one');
});

/** Samples of the error and ingest counters of a server, by code, from `/metrics`. */
async function errorCounts(server: InProcessServer, code: string): Promise<{ http: number; ingest: number }> {
  const text = (await server.client.get('/metrics')).text;
  return {
    http: metricSample(text, `pixiu_http_errors_total{code="${code}"}`) ?? 0,
    ingest: metricSample(text, `pixiu_ingest_messages_total{route="message",outcome="${code}"}`) ?? 0,
  };
}

/**
 * Resolves once the server has closed the next connection it accepts and handled what
 * that close set off (a request still reading its body fails as 'aborted' then): the
 * event to wait on before checking that nothing more was counted.
 */
function nextConnectionClosed(server: InProcessServer): Promise<void> {
  return new Promise((resolve) => {
    server.service.app.server.once('connection', (socket: net.Socket) => socket.once('close', () => setImmediate(resolve)));
  });
}

/** rawExchange, or 'no answer in 5 s' (every answer here is due at once; the request timeout is 60 s). */
function promptExchange(url: string, request: string): Promise<string> {
  return Promise.race([
    rawExchange(url, request),
    new Promise<string>((resolve) => setTimeout(resolve, 5000, 'no answer in 5 s').unref()),
  ]);
}

test('a malformed chunked body is answered 400 INVALID_REQUEST at once and closed, alone or pipelined, counted once, and nothing is stored', async (t) => {
  const server = await freshServer(t);
  const auth = `Authorization: Bearer ${server.client.token}\r\n`;
  const chunked = 'Transfer-Encoding: chunked\r\n';
  const json = `Content-Type: application/json\r\n${chunked}`;
  const body = '{"to":"poison","type":"x","data":1}';
  const size = body.length.toString(16);
  const cases: { name: string; request: string; post: boolean }[] = [
    { name: 'a chunk size that is not hex', request: `POST /v1/messages HTTP/1.1\r\nHost: x\r\n${auth}${json}\r\nZZ\r\n${body}\r\n0\r\n\r\n`, post: true },
    { name: 'no CRLF after the chunk data', request: `POST /v1/messages HTTP/1.1\r\nHost: x\r\n${auth}${json}\r\n${size}\r\n${body}XX0\r\n\r\n`, post: true },
    { name: 'a bad chunk extension', request: `POST /v1/messages HTTP/1.1\r\nHost: x\r\n${auth}${json}\r\n${size};\x01\r\n${body}\r\n0\r\n\r\n`, post: true },
    { name: 'a GET with a bad chunk', request: `GET /healthz HTTP/1.1\r\nHost: x\r\n${chunked}\r\nZZ\r\nabc\r\n0\r\n\r\n`, post: false },
  ];
  for (const c of cases) {
    const before = await errorCounts(server, 'INVALID_REQUEST');
    const closed = nextConnectionClosed(server);
    const started = performance.now();
    const text = await promptExchange(server.service.url, c.request);
    assert.equal(text.match(/HTTP\/1\.1 /g)?.length, 1, `${c.name}: one answer, not ${text}`);
    const { status, head, body: answer } = lastResponse(text);
    assert.equal(status, 400, c.name);
    assert.match(head, /\r\nconnection: close/i, c.name);
    assert.equal((answer as { error: { code: string } }).error.code, 'INVALID_REQUEST', c.name);
    assert.ok(performance.now() - started < 2000, `${c.name}: answered after ${Math.round(performance.now() - started)} ms`);
    // Counted once (the request failing again as its socket closes is not a second
    // error), in the ingest counter too when it was a message.
    await closed;
    assert.deepEqual(await errorCounts(server, 'INVALID_REQUEST'), { http: before.http + 1, ingest: before.ingest + (c.post ? 1 : 0) }, c.name);
  }
  await assertNothingStored(server);
  assert.equal((await errorCounts(server, 'INTERNAL')).http, 0, 'bad bytes from a client are not a server fault');

  // Pipelined behind a message being stored: that one is answered (201), then the
  // broken one at once, not by the request timeout.
  const good = JSON.stringify({ to: 'pipe-c', type: 't', data: 1 });
  const first = `POST /v1/messages HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ${good.length}\r\n\r\n${good}`;
  const started = performance.now();
  const text = await promptExchange(server.service.url, `${first}${cases[0]?.request ?? ''}`);
  assert.deepEqual([...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1])), [201, 400], text);
  assert.ok(performance.now() - started < 2000, `answered after ${Math.round(performance.now() - started)} ms`);
});

test('a body in a transfer coding other than chunked is 501 NOT_IMPLEMENTED and closed, not parsed still encoded, and nothing is stored', async (t) => {
  const server = await freshServer(t);
  const auth = `Authorization: Bearer ${server.client.token}\r\n`;
  const body = '{"to":"poison","type":"x","data":1}';
  // Node's parser reads it (its last coding is chunked); the gzip before it would be ignored.
  const request = `POST /v1/messages HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n\r\n`
    + `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
  const text = await promptExchange(server.service.url, request);
  const { status, head, body: answer } = lastResponse(text);
  assert.equal(status, 501, text);
  assert.match(head, /\r\nconnection: close/i);
  assert.equal((answer as { error: { code: string; message: string } }).error.code, 'NOT_IMPLEMENTED');
  assert.match((answer as { error: { message: string } }).error.message, /Transfer-Encoding "gzip, chunked" is not supported/);
  await assertNothingStored(server);
});

test('coding names are read in any case (RFC 9110 §8.4.1, RFC 9112 §6.1): Transfer-Encoding: Chunked and Content-Encoding: Identity are taken; an HTTP/1.0 request needs no Host', async (t) => {
  const server = await freshServer(t);
  const body = '{"to":"coded","type":"x","data":1}';
  // Connection: close, so that the exchange ends with the answer.
  const request = `POST /v1/messages HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer ${server.client.token}\r\nContent-Type: application/json\r\n`
    + `Transfer-Encoding: Chunked\r\nContent-Encoding: Identity\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
  const coded = lastResponse(await promptExchange(server.service.url, request));
  assert.equal(coded.status, 201, JSON.stringify(coded.body));
  // RFC 9112 §3.2 requires Host of HTTP/1.1 only.
  const old = lastResponse(await promptExchange(server.service.url, 'GET /healthz HTTP/1.0\r\n\r\n'));
  assert.equal(old.status, 200, JSON.stringify(old.body));
});

test('HEAD of an unknown route answers the headers GET would, Content-Length included', async (t) => {
  const server = await freshServer(t);
  for (const path of ['/v1/nope', '/v1/messages']) {
    const get = await fetch(`${server.service.url}${path}`);
    const head = await fetch(`${server.service.url}${path}`, { method: 'HEAD' });
    assert.equal(head.status, get.status, path);
    assert.equal(head.headers.get('content-length'), get.headers.get('content-length'), path);
    assert.equal(await head.text(), '', path);
    await get.text();
  }
});

test('requests pipelined in one packet before bytes that are not a request are answered first, then the 400 closes', async (t) => {
  const server = await freshServer(t);
  const post = (user: string): string => {
    const body = JSON.stringify({ to: user, type: 't', data: 1 });
    return `POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.client.token}\r\n`
      + `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  };
  const text = await rawExchange(server.service.url, `${post('pipe-a')}${post('pipe-b')}garbage\r\n\r\n`);
  const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
  assert.deepEqual(statuses, [201, 201, 400], text);
  assert.equal(lastResponse(text).status, 400);
  assert.match(lastResponse(text).head, /\r\nconnection: close/i);
  for (const user of ['pipe-a', 'pipe-b']) {
    const history = await server.client.get(`/v1/users/${user}/messages`);
    assert.equal((history.body as { messages: unknown[] }).messages.length, 1, `${user}: stored once, and its producer was told so`);
  }
});

test('an error answer to a request with no body keeps the keep-alive connection: the requests behind it are answered', async (t) => {
  const server = await freshServer(t);
  const text = await rawExchange(server.service.url, 'GET /nope HTTP/1.1\r\nHost: x\r\n\r\n'
    + 'GET /v1/users/a/messages HTTP/1.1\r\nHost: x\r\n\r\n'
    + `GET /v1/messages/XYZ HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.client.token}\r\n\r\n`
    + 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  const heads = text.split('HTTP/1.1 ').slice(1);
  assert.deepEqual(heads.map((h) => Number(h.slice(0, 3))), [404, 401, 400, 200], text);
  for (const head of heads.slice(0, 3)) assert.doesNotMatch(head.slice(0, head.indexOf('\r\n\r\n')), /\r\nconnection: close/i);
});

test('an error answer before the body is read, to a request whose body is empty (Content-Length: 0), keeps the keep-alive connection', async (t) => {
  const server = await freshServer(t);
  // Refused by the token check before any body is read: with Content-Length: 0 there is
  // none to wait for, so no lingering close either.
  const text = await rawExchange(server.service.url, 'POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n'
    + 'DELETE /v1/users/a/connections HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong-token\r\nContent-Length: 0\r\n\r\n'
    + 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  const heads = text.split('HTTP/1.1 ').slice(1);
  assert.deepEqual(heads.map((h) => Number(h.slice(0, 3))), [401, 401, 200], text);
  for (const head of heads.slice(0, 2)) assert.doesNotMatch(head.slice(0, head.indexOf('\r\n\r\n')), /\r\nconnection: close/i);
});

test('a body read whole and refused (not JSON, not UTF-8, poisoned keys, empty) keeps the keep-alive connection: the requests behind it are answered', async (t) => {
  const server = await freshServer(t);
  const post = (body: Buffer): Buffer => Buffer.concat([Buffer.from(`POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.client.token}\r\n`
    + `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`), body]);
  const bodies = {
    'not JSON': /not valid JSON/,
    'not UTF-8': /not valid UTF-8/,
    'poisoned keys': /keys named __proto__/,
    empty: /a JSON body is required/,
  };
  const text = await rawExchange(server.service.url, Buffer.concat([
    post(Buffer.from('{"to":"keep","type":"t",')),
    post(Buffer.from('{"to":"k\xffeep","type":"t","data":1}', 'latin1')),
    post(Buffer.from('{"to":"keep","type":"t","data":{"__proto__":{"x":1}}}')),
    post(Buffer.alloc(0)),
    Buffer.from('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'),
  ]));
  const answers = text.split('HTTP/1.1 ').slice(1);
  assert.deepEqual(answers.map((a) => Number(a.slice(0, 3))), [400, 400, 400, 400, 200], text);
  Object.entries(bodies).forEach(([name, message], i) => {
    const answer = answers[i] ?? '';
    assert.doesNotMatch(answer.slice(0, answer.indexOf('\r\n\r\n')), /\r\nconnection: close/i, name);
    assert.match(answer, message, name);
  });
  await assertNothingStored(server);
});

test('an idle keep-alive connection is closed after 72 s, as docs/api.md says (the server\'s keepAliveTimeout)', async (t) => {
  const server = await freshServer(t);
  assert.equal(server.service.app.server.keepAliveTimeout, 72_000);
});

test('a request target with a fragment is refused as such, not as a bad query value, and its connection stays open', async (t) => {
  const server = await freshServer(t);
  const auth = `Authorization: Bearer ${server.client.token}\r\n`;
  const text = await rawExchange(server.service.url,
    `GET /v1/users/a/messages?limit=1#x HTTP/1.1\r\nHost: x\r\n${auth}\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
  const heads = text.split('HTTP/1.1 ').slice(1);
  assert.deepEqual(heads.map((h) => Number(h.slice(0, 3))), [400, 200], text);
  // A well-formed request: refused, not a reason to drop the connection (docs/api.md 400).
  assert.doesNotMatch((heads[0] ?? '').slice(0, (heads[0] ?? '').indexOf('\r\n\r\n')), /\r\nconnection: close/i);
  const first = (heads[0] ?? '').slice((heads[0] ?? '').indexOf('\r\n\r\n') + 4);
  const body = JSON.parse(first.slice(first.indexOf('{'), first.lastIndexOf('}') + 1)) as { error: { message: string } };
  assert.match(body.error.message, /^the request target has a fragment/);
  // Percent-encoded, # is data like any other character (here a bad limit all the same).
  expectError(await server.client.get('/v1/users/a/messages?limit=1%23x'), 400, 'INVALID_REQUEST', /limit/);
});

test('a 16-hex-digit id that is not a MsgID says what is wrong with it', async (t) => {
  const server = await freshServer(t);
  expectError(await server.client.get('/v1/messages/ffffffffffffffff'), 400, 'INVALID_REQUEST', /kind, 01-04 .*not ff/);
  expectError(await server.client.get('/v1/messages/0200000000000001'), 400, 'INVALID_REQUEST', /kind, 01-04 .*not 00/);
  expectError(await server.client.get('/v1/messages/0001000000000000'), 400, 'INVALID_REQUEST', /counter, never 0/);
  expectError(await server.client.get('/v1/messages/XYZ'), 400, 'INVALID_REQUEST', /16 lower-case hex digits/);
  // Well-formed, but not stored (a partition of no store here): not found.
  expectError(await server.client.get('/v1/messages/ff01000000000001'), 404, 'NOT_FOUND');
});

test('a request whose body or headers stop arriving is answered 408 REQUEST_TIMEOUT and closed, and nothing is stored', async (t) => {
  const server = await freshServer(t, { requestTimeoutMs: '400ms' });
  const auth = `Authorization: Bearer ${server.client.token}\r\n`;
  const stalled = {
    body: `POST /v1/messages HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"to":`,
    headers: `POST /v1/messages HTTP/1.1\r\nHost: x\r\n${auth}Content-Ty`,
  };
  const [timeoutsBefore, invalidBefore] = [await errorCounts(server, 'REQUEST_TIMEOUT'), await errorCounts(server, 'INVALID_REQUEST')];
  for (const [part, request] of Object.entries(stalled)) {
    const closed = nextConnectionClosed(server);
    const started = performance.now();
    const answer = lastResponse(await rawExchange(server.service.url, request));
    assert.equal(answer.status, 408, part);
    assert.match(answer.head, /connection: close/i, part);
    assert.deepEqual((answer.body as { error: { code: string } }).error.code, 'REQUEST_TIMEOUT', part);
    // Node checks every quarter of the timeout: the answer is at most that late (and some slack).
    assert.ok(performance.now() - started < 2000, `${part}: answered after ${Math.round(performance.now() - started)} ms`);
    await closed;
  }
  // Each counted once, and nothing else: the parser's complaint as such a connection
  // ends is not a second error. The one whose headers arrived was a message.
  assert.deepEqual(await errorCounts(server, 'REQUEST_TIMEOUT'), { http: timeoutsBefore.http + 2, ingest: timeoutsBefore.ingest + 1 });
  assert.deepEqual(await errorCounts(server, 'INVALID_REQUEST'), invalidBefore);
  await assertNothingStored(server);
  // Refused before its body arrived (no token): one answer, and the connection ends,
  // instead of a 401 now and a 408 for the same request later.
  const refused = await rawExchange(server.service.url, 'POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"to":"a",');
  assert.equal(refused.match(/HTTP\/1\.1 /g)?.length, 1, refused);
  const only = lastResponse(refused);
  assert.equal(only.status, 401);
  assert.match(only.head, /connection: close/i);
});

test('POST /v1/me/ack takes a body of 4 KiB at most: a client token does not buy the producers\' 8 MiB to parse', async (t) => {
  const secret = 'hostile-input-hs256-secret-of-32-chars-or-more';
  const server = await freshServer(t, { jwtSecret: secret });
  const me = new PixiuClient(server.service.url, await testToken({ kind: 'secret', secret }, 'acker'));
  const stored = await server.client.post('/v1/messages', { to: 'acker', type: 'x', data: 1 });
  assert.equal(stored.status, 201, stored.text);
  // Padded with JSON whitespace to exactly the limit, then one byte more.
  const ack = JSON.stringify({ device: 'phone', seq: 1 });
  const padded = (bytes: number): string => `${ack.slice(0, -1)}${' '.repeat(bytes - ack.length)}}`;
  const atLimit = await me.post('/v1/me/ack', padded(ACK_BODY_BYTES));
  assert.equal(atLimit.status, 200, atLimit.text);
  assert.deepEqual(atLimit.body, { device: 'phone', cursor: 1 });
  expectError(await me.post('/v1/me/ack', padded(ACK_BODY_BYTES + 1)), 413, 'PAYLOAD_TOO_LARGE', /^the request body is over the limit of 4096 bytes \(4 KiB, this route's own limit\)$/);
  expectError(await me.post('/v1/me/ack', `{"device":"phone","seq":${nestedJson(1_000_000)}}`), 413, 'PAYLOAD_TOO_LARGE');
});

test('POST /v1/me/ack takes no more than PIXIU_MAX_BODY_BYTES when that is under its own 4 KiB', async (t) => {
  const secret = 'hostile-input-hs256-secret-of-32-chars-or-more';
  const server = await freshServer(t, { jwtSecret: secret, maxBodyBytes: '1024' });
  const me = new PixiuClient(server.service.url, await testToken({ kind: 'secret', secret }, 'lowack'));
  const stored = await server.client.post('/v1/messages', { to: 'lowack', type: 'x', data: 1 });
  assert.equal(stored.status, 201, stored.text);
  const ack = JSON.stringify({ device: 'phone', seq: 1 });
  const padded = (bytes: number): string => `${ack.slice(0, -1)}${' '.repeat(bytes - ack.length)}}`;
  const atLimit = await me.post('/v1/me/ack', padded(1024));
  assert.equal(atLimit.status, 200, atLimit.text);
  expectError(await me.post('/v1/me/ack', padded(1025)), 413, 'PAYLOAD_TOO_LARGE', /over the limit of 1024 bytes/);
});

test('an answer given before the body is read drains a body sent with its headers in one write: the client uploads it all and reads the answer (no EPIPE)', async (t) => {
  const server = await freshServer(t);
  // Far more than loopback's buffers hold: without the drain the upload stalls, then is reset.
  const bytes = 16 * 1024 * 1024;
  const head = (headers: string): string => `POST /v1/messages HTTP/1.1\r\nHost: x\r\n${headers}Content-Length: ${bytes}\r\n\r\n`;
  const cases: [string, string, number][] = [
    ['a wrong token', head('Authorization: Bearer not-the-api-token-at-all\r\nContent-Type: application/json\r\n'), 401],
    ['a body over the limit', head(`Authorization: Bearer ${server.client.token}\r\nContent-Type: application/json\r\n`), 413],
    ['a content type other than JSON', head(`Authorization: Bearer ${server.client.token}\r\nContent-Type: text/plain\r\n`), 415],
  ];
  for (const [name, request, status] of cases) {
    const { hostname, port } = new URL(server.service.url);
    const socket = net.connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    const ended = new Promise<string | undefined>((resolve) => {
      socket.once('error', (err) => resolve(err.message));
      socket.once('close', () => resolve(undefined));
    });
    const wrote = new Promise<string | undefined>((resolve) => {
      socket.write(Buffer.concat([Buffer.from(request), Buffer.alloc(bytes, 0x20)]), (err) => resolve(err?.message));
    });
    assert.equal(await wrote, undefined, `${name}: the whole body was taken`);
    socket.end();
    assert.equal(await ended, undefined, `${name}: no reset`);
    assert.equal(lastResponse(Buffer.concat(chunks).toString('latin1')).status, status, name);
  }
});

test('a 417 to an Expect other than 100-continue drains a body sent with its headers in one write too: the client uploads it all and reads the 417 (no EPIPE)', async (t) => {
  const server = await freshServer(t);
  const bytes = 16 * 1024 * 1024;
  const request = `POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.client.token}\r\nContent-Type: application/json\r\n`
    + `Expect: something-else\r\nContent-Length: ${bytes}\r\n\r\n`;
  const { hostname, port } = new URL(server.service.url);
  const socket = net.connect(Number(port), hostname);
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  const ended = new Promise<string | undefined>((resolve) => {
    socket.once('error', (err) => resolve(err.message));
    socket.once('close', () => resolve(undefined));
  });
  const wrote = new Promise<string | undefined>((resolve) => {
    socket.write(Buffer.concat([Buffer.from(request), Buffer.alloc(bytes, 0x20)]), (err) => resolve(err?.message));
  });
  assert.equal(await wrote, undefined, 'the whole body was taken');
  socket.end();
  assert.equal(await ended, undefined, 'no reset');
  assert.equal(lastResponse(Buffer.concat(chunks).toString('latin1')).status, 417);
});
