/**
 * Tying a producer's retry to its first attempt in the log (walk26 L1; README "Logging",
 * src/api/request-ids.ts, src/api/request-log.ts): a client's `X-Request-Id` (1–128
 * visible ASCII characters) is the request's `reqId`, any other is replaced by one of the
 * node's; every answer says it in `X-Request-Id`, errors included; the failure lines of
 * ingest (503, 409; abandoned, tested in test/service/abandoned-ingest.test.ts) name the
 * method, route, `clientMsgId` and the `msgId` stored, and at debug each message done is
 * a `message accepted` line.
 * The real service in this process, its log captured at debug.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { cleanupList, startInProcessAlone, type HttpAnswer, type InProcessServer, type PixiuClient } from '../harness/pixiu-server.js';
import type { RedisServer } from '../harness/redis-server.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { lastAnswer, rawRequest } from '../harness/raw-http.js';
import { PIPELINE_BOUNDS } from '../../src/api/pipeline-bounds.js';

const files = cleanupList();
let redis: RedisServer;
let server: InProcessServer;
let api: PixiuClient;
let lines: LogLine[];

before(async () => {
  const captured = capturingLogger();
  lines = captured.lines;
  ({ redis, server } = await startInProcessAlone(files, { redisCommandTimeoutMs: '300' }, captured.logger));
  api = server.client;
});

after(() => files.run());

/** `POST /v1/messages` with `id` as its X-Request-Id. */
function send(body: object, id?: string): Promise<HttpAnswer> {
  return api.post('/v1/messages', body, { headers: id === undefined ? {} : { 'x-request-id': id } });
}

test('a client\'s X-Request-Id is the request\'s reqId and is answered back; each message done is a debug line naming its id, client_msg_id and recipients', async () => {
  const from = lines.length;
  const body = { to: ['hdr-a', 'hdr-b'], type: 't', data: 1, client_msg_id: 'hdr-1' };
  const first = await send(body, 'my-trace-1');
  assert.equal(first.status, 201, first.text);
  assert.equal(first.headers.get('x-request-id'), 'my-trace-1');
  const retry = await send(body, 'my-trace-2');
  assert.equal(retry.status, 200, retry.text);
  assert.equal(retry.headers.get('x-request-id'), 'my-trace-2');
  const id = (first.body as { id: string }).id;
  const accepted = lines.slice(from).filter((l) => l.msg === 'message accepted');
  assert.deepEqual(accepted.map((l) => [l.reqId, l.msgId, l.clientMsgId, l.recipients, l.duplicate]),
    [['my-trace-1', id, 'hdr-1', 2, false], ['my-trace-2', id, 'hdr-1', 2, true]]);
  // A batch: one line per item done, with its index.
  const batch = await api.post('/v1/messages/batch', { messages: [body, { to: 'hdr-c', type: 't', data: 2 }] }, { headers: { 'x-request-id': 'my-batch' } });
  assert.equal(batch.headers.get('x-request-id'), 'my-batch');
  const items = lines.slice(from).filter((l) => l.msg === 'message accepted' && l.reqId === 'my-batch');
  assert.deepEqual(items.map((l) => [l.item, l.msgId === id, l.clientMsgId, l.recipients, l.duplicate]), [[0, true, 'hdr-1', 2, true], [1, false, undefined, 1, false]]);
});

test('without an X-Request-Id, or with one not 1–128 visible ASCII characters, the node makes the id, and answers it', async () => {
  // 'req-1': the node's own form is the node's alone (walk29 F3); 'req-1.x', 'REQ-1' are not that form.
  for (const sent of [undefined, 'x'.repeat(129), 'a b', '', 'req-1', 'req-zz9']) {
    const from = lines.length;
    const answer = await send({ to: 'hdr-gen', type: 't', data: 1 }, sent);
    assert.equal(answer.status, 201, answer.text);
    const id = answer.headers.get('x-request-id') ?? '';
    assert.match(id, /^req-[0-9a-z]+$/, String(sent));
    assert.notEqual(id, sent, 'made by the node, not the one sent');
    assert.equal(lines.slice(from).find((l) => l.msg === 'message accepted')?.reqId, id);
  }
  for (const kept of ['x'.repeat(128), 'req-1.x', 'REQ-1']) assert.equal((await send({ to: 'hdr-gen', type: 't', data: 1 }, kept)).headers.get('x-request-id'), kept);
});

test('every error answer says its request id: 400, 401, 404, 409, a 413 before the body is read, a 417 and a pipelined 429', async () => {
  const id = (answer: HttpAnswer): string | null => answer.headers.get('x-request-id');
  const headers = { 'x-request-id': 'err-trace' };
  assert.equal(id(await api.post('/v1/messages', '{', { headers })), 'err-trace');
  assert.equal(id(await api.post('/v1/messages', { to: 'x', type: 't', data: 1 }, { headers: { ...headers, authorization: '' } })), 'err-trace');
  assert.equal(id(await api.get('/v1/nothing', { headers })), 'err-trace');
  const tooLarge = await api.post('/v1/messages', { to: 'x', type: 't', data: 'x'.repeat(1024 * 1024) }, { headers });
  assert.equal(tooLarge.status, 413);
  assert.equal(id(tooLarge), 'err-trace');
  // The 409 of a retry whose body changed names the key and the first message at debug.
  const from = lines.length;
  const first = await send({ to: 'hdr-conflict', type: 't', data: { v: 1 }, client_msg_id: 'hdr-409' });
  const conflict = await send({ to: 'hdr-conflict', type: 't', data: { v: 1, sent_at: 2 }, client_msg_id: 'hdr-409' }, 'err-409');
  assert.equal(conflict.status, 409);
  assert.equal(id(conflict), 'err-409');
  const rejected = lines.slice(from).find((l) => l.msg === 'request rejected' && l.reqId === 'err-409');
  assert.deepEqual([rejected?.code, rejected?.method, rejected?.route, rejected?.clientMsgId, rejected?.msgId],
    ['CONFLICT', 'POST', '/v1/messages', 'hdr-409', (first.body as { id: string }).id]);
  // Answered outside fastify, with the client's id when it sent one.
  const expectation = await rawRequest(server.service.url, 'GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: x\r\nX-Request-Id: err-417\r\n\r\n');
  assert.equal(expectation.status, 417);
  assert.match(expectation.head, /\r\nx-request-id: err-417\r\n/i);
  const piped = await rawRequest(server.service.url, 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: err-429\r\n\r\n'.repeat(PIPELINE_BOUNDS.maxRequests + 1));
  const last = lastAnswer(piped.text);
  assert.match(last, /^HTTP\/1\.1 429 /);
  assert.match(last, /\r\nx-request-id: err-429\r\n/i);
});

test('a batch item\'s 409 is a debug `batch item rejected` line with its item, key and the first message\'s id; a broadcast\'s 409 line names the first broadcast\'s id (walk29 F1, F2)', async () => {
  const from = lines.length;
  const first = { to: 'hdr-bt', type: 't', data: { a: 1 }, client_msg_id: 'bt-409' };
  const stored = await send(first);
  assert.equal(stored.status, 201, stored.text);
  const batch = await api.post('/v1/messages/batch', { messages: [{ ...first, data: { a: 9 } }, { to: 'hdr-bt', type: 't', data: 2, client_msg_id: 'bt-new' }] }, { headers: { 'x-request-id': 'bt-1' } });
  assert.deepEqual((batch.body as { results: { status: number }[] }).results.map((r) => r.status), [409, 201]);
  const rejected = lines.slice(from).filter((l) => l.msg === 'batch item rejected');
  assert.deepEqual(rejected.map((l) => [l.level, l.reqId, l.code, l.method, l.route, l.item, l.clientMsgId, l.msgId]),
    [[20, 'bt-1', 'CONFLICT', 'POST', '/v1/messages/batch', 0, 'bt-409', (stored.body as { id: string }).id]]);
  const broadcast = await api.post('/v1/broadcast', { type: 't', data: 1, client_msg_id: 'bc-409' });
  assert.equal(broadcast.status, 201, broadcast.text);
  const again = await api.post('/v1/broadcast', { type: 't', data: 2, client_msg_id: 'bc-409' }, { headers: { 'x-request-id': 'bc-1' } });
  assert.equal(again.status, 409, again.text);
  const line = lines.slice(from).find((l) => l.msg === 'request rejected' && l.reqId === 'bc-1');
  assert.deepEqual([line?.route, line?.clientMsgId, line?.msgId], ['/v1/broadcast', 'bc-409', (broadcast.body as { id: string }).id]);
});

test('a path the router refuses as not validly percent-encoded, and a CONNECT, answer the request id too (walk29 F8)', async () => {
  for (const path of ['/v1/users/a%ZZ/messages', '/v1/users/a%C3/messages', '/v1/users/%FF/messages', '/v1/messages/%ZZ', '/v1/rooms/a%ZZ/members', '/v1/nosuch%ZZ']) {
    const from = lines.length;
    const sent = await rawRequest(server.service.url, `GET ${path} HTTP/1.1\r\nHost: x\r\nX-Request-Id: pct-1\r\nConnection: close\r\n\r\n`);
    assert.equal(sent.status, 400, path);
    assert.match(sent.head, /\r\nx-request-id: pct-1\r\n/i, path);
    // Without a client's id, the node's own, the one its log line names.
    const made = await rawRequest(server.service.url, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    const id = /\r\nx-request-id: (req-[0-9a-z]+)\r\n/i.exec(made.head)?.[1];
    assert.ok(id !== undefined, made.head);
    assert.deepEqual(lines.slice(from).filter((l) => l.msg === 'request rejected').map((l) => l.reqId), ['pct-1', id], path);
  }
  const connect = await rawRequest(server.service.url, 'CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\nX-Request-Id: conn-1\r\n\r\n');
  assert.equal(connect.status, 404);
  assert.match(connect.head, /\r\nx-request-id: conn-1\r\n/i);
});

test('a 503 of a message whose appends Redis did not answer is logged with its method, route, client_msg_id, stored id and reqId', { timeout: 30_000 }, async () => {
  const from = lines.length;
  redis.pause();
  let answer: HttpAnswer;
  try {
    answer = await send({ to: 'hdr-down', type: 't', data: 1, client_msg_id: 'hdr-503' }, 'trace-503');
  } finally {
    redis.resume();
  }
  assert.equal(answer.status, 503, answer.text);
  assert.equal(answer.headers.get('x-request-id'), 'trace-503');
  const warn = lines.slice(from).find((l) => l.msg === 'request unavailable');
  assert.ok(warn !== undefined, JSON.stringify(lines.slice(from)));
  assert.deepEqual([warn.reqId, warn.method, warn.route, warn.clientMsgId], ['trace-503', 'POST', '/v1/messages', 'hdr-503']);
  // Stored before its appends failed: the retry's answer names the same id.
  const retry = await send({ to: 'hdr-down', type: 't', data: 1, client_msg_id: 'hdr-503' });
  assert.equal(retry.status, 200, retry.text);
  assert.equal(warn.msgId, (retry.body as { id: string }).id);
});

test('a node shutting down answers its 503 with the request id', async () => {
  server.service.app.stopTakingRequests();
  const refused = await send({ to: 'x', type: 't', data: 1 }, 'trace-down');
  assert.equal(refused.status, 503);
  assert.equal(refused.headers.get('x-request-id'), 'trace-down');
});
