/**
 * A message whose producer gave up on it before it was stored is not stored
 * (src/ingest/abandoned.ts; docs/api.md, "Messages"). On a Redis shared by several
 * stores a message with `client_msg_id` is claimed in Redis first
 * (src/cluster/client-id-claims.ts); here Redis holds that claim (`CLIENT PAUSE …
 * WRITE`) while the producer, a raw TCP socket, leaves (FIN or RST), as a producer's
 * timeout does on a starved node. Before, the attempt went on once Redis answered: it
 * stored the message and settled the claim, so the producer's retry on another node was
 * answered `200 duplicate` with the abandoned attempt's message — and after a Redis
 * restore that lost the claim, stored a second time under another id (the cluster
 * tester's F2). Now nothing is stored, the claim is released, the request is counted
 * `abandoned`, and the retry on another node is `201 duplicate: false`. Without a claim
 * (a room message without `client_msg_id`) the same holds for a wait on the room's
 * clock. A producer that stays gets its `201` as before. A batch item stored already,
 * held back behind an earlier item so dropped, is counted `UNAVAILABLE`, not `abandoned`.
 * Each drop is a debug line, `request abandoned by its client …`, naming the request as
 * the other failure lines do (src/api/request-log.ts: `route` the URL pattern) and
 * `ingest`, its metric label (review36-api F3).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import type { Socket } from 'node:net';
import { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import { metricSample, waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { cleanupList, startInProcess, type InProcessServer } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

const cleanup = cleanupList();
let redis: RedisServer;
let probe: Redis;
/** The node whose request waits on the claim, and the node the producer retries on. */
let a: InProcessServer;
let b: InProcessServer;
/** a's end of each test request's connection, by its `x-test-request` header. */
const serverSockets = new Map<string, Socket>();
const keys = new Keys('px:');
/** a's log, at debug. */
const aLog = capturingLogger();

before(async () => {
  redis = await RedisServer.start();
  // A node that ran on this Redis and stopped: its store stays there, so the Redis is
  // shared and every message with client_msg_id is claimed before it is stored.
  const first = await startInProcess(cleanup, { redisUrl: redis.url });
  await first.service.close();
  a = await startInProcess(cleanup, { redisUrl: redis.url, redisCommandTimeoutMs: '30s' }, aLog.logger);
  b = await startInProcess(cleanup, { redisUrl: redis.url });
  a.service.app.server.on('request', (req: IncomingMessage) => {
    const id = req.headers['x-test-request'];
    if (typeof id === 'string') serverSockets.set(id, req.socket);
  });
  probe = new Redis(redis.url);
});

after(async () => {
  try {
    await probe?.call('CLIENT', 'UNPAUSE').catch(() => undefined);
    probe?.disconnect();
    await cleanup.run();
  } finally {
    await redis?.destroy();
  }
});

/** Sends `body` to a's `path` on a raw socket, marked `id` (its X-Request-Id too); returns the socket, the request written. */
async function rawPost(path: string, body: unknown, id: string): Promise<net.Socket> {
  const { port } = new URL(a.service.url);
  const socket = net.connect(Number(port), '127.0.0.1');
  socket.on('error', () => undefined);
  socket.on('data', () => undefined);
  await new Promise((resolve) => socket.once('connect', resolve));
  const text = JSON.stringify(body);
  socket.write([
    `POST ${path} HTTP/1.1`, `Host: 127.0.0.1:${port}`, 'Content-Type: application/json', `Content-Length: ${Buffer.byteLength(text)}`,
    `Authorization: Bearer ${a.service.secrets.apiToken}`, `X-Test-Request: ${id}`, `X-Request-Id: ${id}`, '', text,
  ].join('\r\n'));
  return socket;
}

/** a's metric sample `line` (0 when absent). */
async function metricOfA(line: string): Promise<number> {
  const text = (await a.client.get('/metrics', { headers: { authorization: '' } })).text;
  return metricSample(text, line) ?? 0;
}

/** a's `pixiu_ingest_messages_total` for `route` and `outcome`. */
function ingestCount(route: string, outcome: string): Promise<number> {
  return metricOfA(`pixiu_ingest_messages_total{route="${route}",outcome="${outcome}"}`);
}

/**
 * The fields of a's `request abandoned by its client …` line for the request sent as `id`
 * (its reqId: {@link rawPost}), with its level; undefined when there is none.
 */
function abandonedLine(id: string): Record<string, unknown> | undefined {
  const line = aLog.lines.find((l) => l.reqId === id && (l.msg ?? '').startsWith('request abandoned by its client before its message was stored'));
  if (line === undefined) return undefined;
  const { level, method, route, clientMsgId, msgId, ingest, messages } = line;
  return Object.fromEntries(Object.entries({ level, method, route, clientMsgId, msgId, ingest, messages }).filter(([, v]) => v !== undefined));
}

/** Records a's store has written. */
function storedRecords(): Promise<number> {
  return metricOfA('pixiu_store_batch_size_sum');
}

/** What Redis holds under `cid`'s claim: null, a store's pending mark `P|…`, or a MsgID. */
function claimOf(cid: string): Promise<string | null> {
  return probe.get(keys.clientIdClaim(cid));
}

/** Has Redis hold every write, the claims among them, until `CLIENT UNPAUSE` (or 20 s). */
async function pauseWrites(): Promise<void> {
  await probe.call('CLIENT', 'PAUSE', '20000', 'WRITE');
}

/** Returns once a's claims of `cids` wait on the pause, none of them made yet. */
async function claimsWait(cids: readonly string[]): Promise<void> {
  await waitUntil('the claims wait on the pause', async () => {
    const waiting = String(await probe.call('CLIENT', 'LIST')).split('\n').filter((l) => /flags=\S*b\S* .*cmd=set/.test(l));
    return waiting.length > 0;
  }, 5000, 5);
  // Claims go out as one pipeline per turn (tick-pipeline.ts): none of them is stored yet.
  for (const cid of cids) assert.equal(await claimOf(cid), null);
}

/**
 * The producer leaves `id`'s request while its claims wait, then Redis takes writes again.
 * @returns once each claim is no longer a's pending mark (released, or settled)
 */
async function leaveWhileClaimed(socket: net.Socket, id: string, how: 'fin' | 'rst', cids: readonly string[]): Promise<void> {
  await waitUntil('a has the request', async () => serverSockets.has(id), 5000, 5);
  const serverSide = serverSockets.get(id) as Socket;
  if (how === 'fin') socket.end();
  else socket.resetAndDestroy();
  await waitUntil('a saw the producer leave', async () => serverSide.destroyed || !serverSide.readable, 5000, 5);
  await probe.call('CLIENT', 'UNPAUSE');
  for (const cid of cids) {
    await waitUntil(`the claim of ${cid} is no longer pending`, async () => !(await claimOf(cid) ?? '').startsWith('P|'), 10_000, 10);
  }
}

for (const how of ['fin', 'rst'] as const) {
  test(`a message whose producer left (${how.toUpperCase()}) while its claim waited on Redis is not stored: counted abandoned, and the retry on another node is 201 duplicate: false`, async () => {
    const cid = `gone-${how}`;
    const body = { to: `gone-user-${how}`, type: 't', data: { n: 1 }, client_msg_id: cid };
    const before = await ingestCount('message', 'abandoned');
    await pauseWrites();
    const socket = await rawPost('/v1/messages', body, cid);
    await claimsWait([cid]);
    await leaveWhileClaimed(socket, cid, how, [cid]);
    assert.equal(await claimOf(cid), null, 'the claim is released, not settled with a message stored');
    await waitUntil('counted abandoned', async () => (await ingestCount('message', 'abandoned')) === before + 1, 5000, 10);
    // `route` is the URL pattern, as on the other failure lines; `ingest` the metric label.
    assert.deepEqual(abandonedLine(cid), { level: 20, method: 'POST', route: '/v1/messages', clientMsgId: cid, ingest: 'message', messages: 1 });
    const retry = await b.client.post('/v1/messages', body);
    assert.equal(retry.status, 201, retry.text);
    assert.equal((retry.body as { duplicate: boolean }).duplicate, false);
    // a stored none of its own: its answer now is b's message.
    const again = await a.client.post('/v1/messages', body);
    assert.equal(again.status, 200, again.text);
    assert.equal((again.body as { id: string }).id, (retry.body as { id: string }).id);
    socket.destroy();
  });
}

test('a batch whose producer left while its items\' claims waited stores none of them: each counted abandoned, the retry elsewhere creates both', async () => {
  const cids = ['gone-batch-0', 'gone-batch-1'];
  const body = { messages: cids.map((cid, i) => ({ to: ['gone-batch-user', `gone-batch-${i}`], type: 't', data: i, client_msg_id: cid })) };
  const before = await ingestCount('batch', 'abandoned');
  await pauseWrites();
  const socket = await rawPost('/v1/messages/batch', body, 'batch');
  await claimsWait(cids);
  await leaveWhileClaimed(socket, 'batch', 'fin', cids);
  for (const cid of cids) assert.equal(await claimOf(cid), null, `${cid}: the claim is released`);
  await waitUntil('counted abandoned', async () => (await ingestCount('batch', 'abandoned')) === before + 2, 5000, 10);
  // A batch has no key of its own: its items' are in no line.
  assert.deepEqual(abandonedLine('batch'), { level: 20, method: 'POST', route: '/v1/messages/batch', ingest: 'batch', messages: 2 });
  const retry = await b.client.post('/v1/messages/batch', body);
  assert.equal(retry.status, 200, retry.text);
  assert.deepEqual((retry.body as { results: { status: number }[] }).results.map((r) => r.status), [201, 201]);
  socket.destroy();
});

test('a batch item stored while an earlier one to the same user waited on its claim, and held back when that one was dropped, is counted UNAVAILABLE, not abandoned: it was stored', async () => {
  const user = 'mixed-user';
  const cid = 'mixed-0';
  // Item 1 has no client_msg_id, so no claim: it is stored at once, and its append
  // waits for item 0's (same user, batch order), which waits on its claim.
  const body = { messages: [{ to: user, type: 't', data: 0, client_msg_id: cid }, { to: user, type: 't', data: 1 }] };
  const abandoned = await ingestCount('batch', 'abandoned');
  const unavailable = await ingestCount('batch', 'UNAVAILABLE');
  const written = await storedRecords();
  await pauseWrites();
  const socket = await rawPost('/v1/messages/batch', body, 'mixed');
  await claimsWait([cid]);
  await waitUntil('item 1 is stored', async () => (await storedRecords()) === written + 1, 5000, 5);
  await leaveWhileClaimed(socket, 'mixed', 'fin', [cid]);
  assert.equal(await claimOf(cid), null, 'item 0 is not stored: its claim is released');
  await waitUntil('the batch is counted', async () => (await ingestCount('batch', 'abandoned')) > abandoned, 5000, 10);
  // Both are counted in one step, once the batch is dropped.
  assert.equal(await ingestCount('batch', 'abandoned'), abandoned + 1, 'only item 0 was not stored');
  assert.equal(await ingestCount('batch', 'UNAVAILABLE'), unavailable + 1, 'item 1 was stored, held back as after a 503');
  assert.deepEqual(abandonedLine('mixed'), { level: 20, method: 'POST', route: '/v1/messages/batch', ingest: 'batch', messages: 1 }, 'names only the item not stored');
  // Held back: item 1 reaches no inbox ahead of item 0's retry.
  const held = await a.client.get(`/v1/users/${user}/messages`);
  assert.equal(held.status, 200, held.text);
  assert.deepEqual((held.body as { messages: unknown[] }).messages, []);
  const retry = await b.client.post('/v1/messages/batch', body);
  assert.equal(retry.status, 200, retry.text);
  assert.deepEqual((retry.body as { results: { status: number }[] }).results.map((r) => r.status), [201, 201]);
  const inbox = await a.client.get(`/v1/users/${user}/messages`);
  assert.deepEqual((inbox.body as { messages: { data: unknown }[] }).messages.map((m) => m.data), [0, 1], 'in batch order');
  socket.destroy();
});

test('a broadcast whose producer left while its claim waited is not stored: the retry elsewhere is 201', async () => {
  const cid = 'gone-broadcast';
  const body = { type: 't', data: 'hello', client_msg_id: cid };
  const before = await ingestCount('broadcast', 'abandoned');
  await pauseWrites();
  const socket = await rawPost('/v1/broadcast', body, cid);
  await claimsWait([cid]);
  await leaveWhileClaimed(socket, cid, 'rst', [cid]);
  assert.equal(await claimOf(cid), null, 'the claim is released');
  await waitUntil('counted abandoned', async () => (await ingestCount('broadcast', 'abandoned')) === before + 1, 5000, 10);
  assert.deepEqual(abandonedLine(cid), { level: 20, method: 'POST', route: '/v1/broadcast', clientMsgId: cid, ingest: 'broadcast', messages: 1 });
  const retry = await b.client.post('/v1/broadcast', body);
  assert.equal(retry.status, 201, retry.text);
});

test('a room message without client_msg_id (no claim) whose producer left while its time was read from Redis is not stored: no member gets it', async () => {
  const room = 'gone-room';
  const added = await a.client.request('PUT', `/v1/rooms/${room}/members`, { body: { users: ['gone-member'] } });
  assert.equal(added.status, 200, added.text);
  const before = await ingestCount('message', 'abandoned');
  await pauseWrites();
  const socket = await rawPost('/v1/messages', { room, type: 't', data: 1 }, room);
  // The message's time on the room's clock (a script, Rooms.messageTime) waits on the pause.
  await waitUntil('the room\'s script waits on the pause', async () => /flags=\S*b\S* .*cmd=evalsha/.test(String(await probe.call('CLIENT', 'LIST'))), 5000, 5);
  await leaveWhileClaimed(socket, room, 'fin', []);
  await waitUntil('counted abandoned', async () => (await ingestCount('message', 'abandoned')) === before + 1, 5000, 10);
  const history = await a.client.get('/v1/users/gone-member/messages');
  assert.equal(history.status, 200, history.text);
  assert.deepEqual((history.body as { messages: unknown[] }).messages, []);
  socket.destroy();
});

test('a message whose producer stays while its claim waits on Redis is stored and answered 201, as before', async () => {
  const cid = 'stays';
  const body = { to: 'stays-user', type: 't', data: 1, client_msg_id: cid };
  const before = await ingestCount('message', 'abandoned');
  const created = await ingestCount('message', 'created');
  await pauseWrites();
  const answer = a.client.post('/v1/messages', body);
  await claimsWait([cid]);
  await probe.call('CLIENT', 'UNPAUSE');
  const stored = await answer;
  assert.equal(stored.status, 201, stored.text);
  assert.equal(await claimOf(cid), (stored.body as { id: string }).id, 'the claim names the message stored');
  assert.equal(await ingestCount('message', 'abandoned'), before);
  assert.equal(await ingestCount('message', 'created'), created + 1);
  const retry = await b.client.post('/v1/messages', body);
  assert.equal(retry.status, 200, retry.text);
  assert.equal((retry.body as { id: string }).id, (stored.body as { id: string }).id);
});
