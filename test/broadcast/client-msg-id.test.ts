/**
 * `client_msg_id` on `POST /v1/broadcast` (docs/api.md "Broadcast", docs/decisions.md
 * "Broadcast"): a producer's retry publishes a broadcast once.
 *
 * - The same key with the same content: `200`, the same `id` and `bseq`,
 *   `duplicate: true`; the stream holds one entry of it, a connected client gets it
 *   once; tags in another order, or repeated, are the same tags.
 * - The same key with another type, data or tags, or a key a user or room message
 *   holds: `409`, nothing appended; a message sent with a broadcast's key is `409` too.
 * - 20 identical POSTs at once: one stream entry, one frame per client, one id and bseq.
 * - Without a key nothing changes: each POST is a broadcast of its own.
 *
 * A real private redis-server and the service in this process, over HTTP and WebSocket.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import { expectError, openInbox } from '../harness/checks.js';
import { cleanupList, type HttpAnswer } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import type { TestClient } from '../harness/ws-client.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { entriesOf, expectFrame, getsOnly, type Answered } from './broadcast-fixture.js';

const keys = new Keys('px:');
const cleanup = cleanupList();
let gw: GatewayFixture;
let admin: Redis;
let client: TestClient;

before(async () => {
  const redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed' });
  admin = (await openInbox(cleanup, redis.url)).redis;
  client = await gw.connect('watcher');
  await expectFrame(client, 'welcome');
});

after(() => cleanup.run());

function post(body: Record<string, unknown>): Promise<HttpAnswer> {
  return gw.client.post('/v1/broadcast', body);
}

test('the same client_msg_id with the same broadcast again: 200, the same id and bseq, duplicate: true, appended once', async () => {
  const body = { type: 'test.news', data: { n: 1, text: 'sale' }, tags: { any: ['vip', 'beta'] }, client_msg_id: 'news-1' };
  const first = await post(body);
  assert.equal(first.status, 201, first.text);
  const created = first.body as Answered;
  assert.equal(created.duplicate, false);
  // Object keys in another order, the tags in another order and one repeated: the same broadcast.
  const again = await post({ ...body, data: { text: 'sale', n: 1 }, tags: { any: ['beta', 'vip', 'beta'] } });
  assert.equal(again.status, 200, again.text);
  assert.deepEqual(again.body, { id: created.id, bseq: created.bseq, duplicate: true });
  assert.deepEqual(await entriesOf(admin, created.id), [created.bseq], 'one stream entry');
  // The watcher has no tags: a broadcast to vip or beta does not reach it; an untagged one does, once.
  const open = { type: 'test.news', data: 'everyone', client_msg_id: 'news-2' };
  const everyone = (await post(open)).body as Answered;
  const repeat = await post(open);
  assert.equal(repeat.status, 200, repeat.text);
  assert.equal((repeat.body as Answered).bseq, everyone.bseq);
  await getsOnly(gw.client, client, [everyone.bseq]);
  // The marker lives as long as the broadcast's record: its expiry is given on Redis's
  // clock (redis-clock.ts), through the offset the node registry measured, which is off
  // by up to about half that measure's round trip — a few ms here, on one machine.
  const record = await gw.client.get(`/v1/messages/${created.id}`);
  assert.equal(record.status, 200, record.text);
  assert.equal((record.body as { client_msg_id: string }).client_msg_id, 'news-1');
  const drift = await admin.pexpiretime(keys.broadcastMarker(created.id)) - (record.body as { expires_at: number }).expires_at;
  assert.ok(Math.abs(drift) <= 50, `the marker expires ${drift} ms from the record`);
});

test('the same client_msg_id with another type, data or tags is 409, naming the first broadcast as a broadcast; nothing is appended', async () => {
  const body = { type: 'test.news', data: { n: 1 }, tags: { all: ['vip'] }, client_msg_id: 'news-conflict' };
  const created = (await post(body)).body as Answered;
  const length = await admin.xlen(keys.broadcast());
  for (const [what, other] of [
    ['type', { type: 'test.other' }],
    ['data', { data: { n: 2 } }],
    ['tags', { tags: { any: ['vip'] } }],
    ['tags', { tags: { all: ['vip', 'beta'] } }],
    ['tags', { tags: undefined }],
  ] as const) {
    const answer = await post({ ...body, ...other });
    expectError(answer, 409, 'CONFLICT', new RegExp(`^client_msg_id "news-conflict" was first used for another broadcast \\(${created.id}: its ${what === 'tags' ? 'tags' : 'type or data'} differ\\); nothing was published\\. If this is a retry of that broadcast, it was stored as ${created.id}: to retry, send the very same body; a new client_msg_id is for a different broadcast$`));
  }
  assert.equal(await admin.xlen(keys.broadcast()), length, 'nothing appended');
  // ttl is not compared (as for messages).
  const longer = await post({ ...body, ttl: 60 });
  assert.deepEqual([longer.status, longer.body], [200, { ...created, duplicate: true }]);
});

test('a client_msg_id a user or room message holds is 409 on a broadcast, and a broadcast\'s key is 409 on a message', async () => {
  const sent = await gw.client.post('/v1/messages', { to: 'ann', type: 'test.news', data: { n: 1 }, client_msg_id: 'shared-key' });
  assert.equal(sent.status, 201, sent.text);
  const length = await admin.xlen(keys.broadcast());
  expectError(await post({ type: 'test.news', data: { n: 1 }, client_msg_id: 'shared-key' }), 409, 'CONFLICT',
    /^client_msg_id "shared-key" was first used for another message \([0-9a-f]{16}: it is a message to users or a room, not a broadcast\); send a new broadcast with a new client_msg_id$/);
  assert.equal((await gw.client.request('PUT', '/v1/rooms/club/members', { body: { users: ['bob'] } })).status, 200);
  assert.equal((await gw.client.post('/v1/messages', { room: 'club', type: 'test.news', data: 1, client_msg_id: 'room-key' })).status, 201);
  expectError(await post({ type: 'test.news', data: 1, client_msg_id: 'room-key' }), 409, 'CONFLICT', /not a broadcast/);
  assert.equal(await admin.xlen(keys.broadcast()), length, 'nothing appended');

  // (Tagged, so the watcher, with no tags, does not get it.)
  assert.equal((await post({ type: 'test.news', data: 1, tags: { all: ['staff'] }, client_msg_id: 'bcast-key' })).status, 201);
  // Named as a broadcast's key, not as a message whose recipients or data differ.
  const broadcastKey = /^client_msg_id "bcast-key" was first used for another broadcast \([0-9a-f]{16}: it is a broadcast, not a message to users or a room\); send a new message with a new client_msg_id$/;
  expectError(await gw.client.post('/v1/messages', { to: 'ann', type: 'test.news', data: 1, client_msg_id: 'bcast-key' }), 409, 'CONFLICT', broadcastKey);
  expectError(await gw.client.post('/v1/messages', { room: 'club', type: 'test.news', data: 1, client_msg_id: 'bcast-key' }), 409, 'CONFLICT', broadcastKey);
  const inbox = await gw.client.get('/v1/users/ann/messages');
  assert.equal((inbox.body as { messages: unknown[] }).messages.length, 1, 'only the first message reached ann');
});

test('20 identical POSTs at once: one stream entry, one id and bseq, the client gets it once', async () => {
  const body = { type: 'test.news', data: { flash: true }, client_msg_id: 'flash-sale' };
  const answers = await Promise.all(Array.from({ length: 20 }, () => post(body)));
  for (const a of answers) assert.ok(a.status === 200 || a.status === 201, a.text);
  const bodies = answers.map((a) => a.body as Answered);
  const first = bodies[0] as Answered;
  for (const b of bodies) assert.deepEqual([b.id, b.bseq], [first.id, first.bseq]);
  assert.ok(bodies.some((b) => !b.duplicate), 'one of them published it');
  assert.deepEqual(await entriesOf(admin, first.id), [first.bseq], 'one stream entry');
  await getsOnly(gw.client, client, [first.bseq]);
});

test('without client_msg_id each POST is a broadcast of its own (201, duplicate: false), and leaves no marker', async () => {
  const body = { type: 'test.news', data: { same: true } };
  const one = (await post(body)).body as Answered;
  const two = await post(body);
  assert.equal(two.status, 201, two.text);
  assert.notEqual((two.body as Answered).id, one.id);
  assert.equal((two.body as Answered).duplicate, false);
  assert.equal(await admin.exists(keys.broadcastMarker(one.id)), 0);
  await getsOnly(gw.client, client, [one.bseq, (two.body as Answered).bseq]);
});
