/**
 * Room messages end to end (DESIGN.md §8): a message POSTed to a room is stored once
 * and its MsgID appended to the inbox of every member who had joined when it was sent,
 * so members get it as a `msg` with `room`, live or on reconnect. Removed members get
 * nothing new, members added later get nothing earlier (also not from a retry), and a
 * retry with the same `client_msg_id` appends to no one twice. Real Redis, the real
 * service, real WebSocket clients; every "nothing arrived" is checked by the next frame
 * being a later marker message, never by waiting.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { INBOX_RETENTION_GRACE_MS, type Inbox } from '../../src/inbox/inbox.js';
import { Keys } from '../../src/redis/keys.js';
import { expectError, openInbox, readWholeInbox } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import type { TestClient } from '../harness/ws-client.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { addMembers, deleteMembers, expectRoomMsg, postRoom } from './room-fixture.js';

let gw: GatewayFixture;
let inbox: Inbox;
let redisClient: Redis;

fileRedis(async ({ redis, cleanup }) => {
  // Relaxed store durability: these tests are about fan-out, not fsync.
  gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed' });
  ({ inbox, redis: redisClient } = await openInbox(cleanup, redis.url));
});

/** The MsgIDs in a user's inbox, oldest first. */
async function inboxIds(user: string): Promise<string[]> {
  return (await readWholeInbox(inbox, user)).map((e) => e.id);
}

/** Connects `user` and reads the welcome, asserting where delivery starts. */
async function connectAt(user: string, resumeFrom: number, latest: number): Promise<TestClient> {
  const { client, welcome } = await gw.connectWelcomed(user);
  assert.equal(welcome.resume_from, resumeFrom, `${user} resume_from`);
  assert.equal(welcome.seq, latest, `${user} latest`);
  return client;
}

/** Sends `user` a direct message and returns its id: a marker that later frames are checked against. */
async function marker(user: string): Promise<string> {
  const answer = await gw.client.post('/v1/messages', { to: user, type: 'marker', data: 'marker' });
  assert.equal(answer.status, 201, answer.text);
  return (answer.body as { id: string }).id;
}

/** Asserts the next frame is the marker message `id` at `seq`. */
async function expectMarker(client: TestClient, seq: number, id: string): Promise<void> {
  const f = await client.next();
  assert.equal(f.t, 'msg', JSON.stringify(f));
  assert.equal(f.id, id, `expected the marker, got ${JSON.stringify(f)}`);
  assert.equal(f.seq, seq);
  assert.equal(f.room, undefined);
}

test('50 members, 10 offline: a room message reaches the 40 live as msg with room, and the 10 when they reconnect', async () => {
  const room = 'hall-50';
  const users = Array.from({ length: 50 }, (_, i) => `hall-u${i}`);
  await addMembers(gw.client, room, users);
  const clients = await Promise.all(users.map((u) => connectAt(u, 1, 0)));
  const offline = users.slice(40);
  await Promise.all(clients.slice(40).map((c) => c.close()));

  const sent = await postRoom(gw.client, { room, from: 'hall-u0', data: { text: 'hello room' } }, { status: 201, recipients: 50 });
  await Promise.all(clients.slice(0, 40).map(async (c) => {
    const f = await expectRoomMsg(c, { seq: 1, id: sent.id, room, from: 'hall-u0' });
    c.ack(f.seq as number);
  }));

  const back = await Promise.all(offline.map((u) => connectAt(u, 1, 1)));
  await Promise.all(back.map((c) => expectRoomMsg(c, { seq: 1, id: sent.id, room, from: 'hall-u0' })));
  for (const u of users) assert.deepEqual(await inboxIds(u), [sent.id], `${u}'s inbox holds the room message once`);
});

test('a retried room POST with the same client_msg_id is appended to no member twice, alone or in a batch', async () => {
  const room = 'retry-room';
  const users = ['rr-a', 'rr-b', 'rr-c', 'rr-d', 'rr-e'];
  await addMembers(gw.client, room, users);
  const live = await connectAt('rr-a', 1, 0);
  const body = { room, client_msg_id: 'retry-room-1' };
  const first = await postRoom(gw.client, body, { status: 201, recipients: 5 });
  await expectRoomMsg(live, { seq: 1, id: first.id, room });

  const again = await postRoom(gw.client, body, { status: 200, recipients: 5 });
  assert.equal(again.id, first.id, 'the retry answers the first message');
  // Other content under the same client_msg_id is another message: refused, appended nowhere.
  const changed = await gw.client.post('/v1/messages', { type: 'room.text', data: { text: 'changed on retry' }, ...body });
  expectError(changed, 409, 'CONFLICT', /retry-room-1/);
  const batch = await gw.client.post('/v1/messages/batch', { messages: [{ type: 'room.text', data: { text: 'hello room' }, ...body }] });
  assert.equal(batch.status, 200, batch.text);
  assert.deepEqual((batch.body as { results: unknown[] }).results, [{ status: 200, id: first.id, room, recipients: 5, duplicate: true }]);

  const next = await postRoom(gw.client, { room }, { status: 201, recipients: 5 });
  await expectRoomMsg(live, { seq: 2, id: next.id, room });
  for (const u of users) assert.deepEqual(await inboxIds(u), [first.id, next.id], u);
});

test('each member keeps its inbox keys until a day after the room message it was sent expires', async () => {
  const room = 'kept-room';
  const users = ['kr-a', 'kr-b'];
  await addMembers(gw.client, room, users);
  const sent = await postRoom(gw.client, { room, ttl: 600 }, { status: 201, recipients: 2 });
  const { expires_at: expiresAt } = (await gw.client.get(`/v1/messages/${sent.id}`)).body as { expires_at: number };
  const keys = new Keys('px:');
  for (const u of users) assert.equal(await redisClient.pexpiretime(keys.inbox(u)), expiresAt + INBOX_RETENTION_GRACE_MS, u);
});

test('a removed member gets nothing new; the others still do', async () => {
  const room = 'leavers';
  await addMembers(gw.client, room, ['lv-stay', 'lv-go']);
  const stay = await connectAt('lv-stay', 1, 0);
  const go = await connectAt('lv-go', 1, 0);
  const before = await postRoom(gw.client, { room }, { status: 201, recipients: 2 });
  await expectRoomMsg(stay, { seq: 1, id: before.id, room });
  await expectRoomMsg(go, { seq: 1, id: before.id, room });

  const removed = await deleteMembers(gw.client, room, ['lv-go', 'lv-never-a-member']);
  assert.equal(removed.status, 200, removed.text);
  assert.deepEqual(removed.body, { room, removed: 1, size: 1 });
  const afterLeave = await postRoom(gw.client, { room }, { status: 201, recipients: 1 });
  await expectRoomMsg(stay, { seq: 2, id: afterLeave.id, room });
  const m = await marker('lv-go');
  await expectMarker(go, 2, m);
  assert.deepEqual(await inboxIds('lv-go'), [before.id, m]);
});

test('a member added after a message does not get it, also not when it is retried with its client_msg_id after the add', async () => {
  const room = 'latecomers';
  await addMembers(gw.client, room, ['lc-early']);
  const body = { room, client_msg_id: 'latecomers-1' };
  const early = await postRoom(gw.client, body, { status: 201, recipients: 1 });

  await addMembers(gw.client, room, ['lc-late']);
  const late = await connectAt('lc-late', 1, 0);
  const retried = await postRoom(gw.client, body, { status: 200, recipients: 1 });
  assert.equal(retried.id, early.id);
  const batch = await gw.client.post('/v1/messages/batch', { messages: [{ type: 'room.text', data: { text: 'hello room' }, ...body }] });
  assert.deepEqual((batch.body as { results: unknown[] }).results, [{ status: 200, id: early.id, room, recipients: 1, duplicate: true }]);

  const next = await postRoom(gw.client, { room }, { status: 201, recipients: 2 });
  await expectRoomMsg(late, { seq: 1, id: next.id, room });
  assert.deepEqual(await inboxIds('lc-late'), [next.id]);
  assert.deepEqual(await inboxIds('lc-early'), [early.id, next.id]);
});

test('a member removed and added again is a new member: earlier messages stay away, also on retry', async () => {
  const room = 'rejoin';
  await addMembers(gw.client, room, ['rj-host', 'rj-back']);
  const body = { room, client_msg_id: 'rejoin-1' };
  const first = await postRoom(gw.client, body, { status: 201, recipients: 2 });
  await deleteMembers(gw.client, room, ['rj-back']);
  const whileOut = await postRoom(gw.client, { room, client_msg_id: 'rejoin-2' }, { status: 201, recipients: 1 });
  await addMembers(gw.client, room, ['rj-back']);
  await postRoom(gw.client, { room, client_msg_id: 'rejoin-2' }, { status: 200, recipients: 1 });
  const afterBack = await postRoom(gw.client, { room }, { status: 201, recipients: 2 });
  assert.deepEqual(await inboxIds('rj-back'), [first.id, afterBack.id]);
  assert.deepEqual(await inboxIds('rj-host'), [first.id, whileOut.id, afterBack.id]);
});

test('POST /v1/messages/batch with room items: each answered in order, members get them in batch order, also among user items', async () => {
  const room = 'batch-room';
  const members = ['br-a', 'br-b', 'br-c'];
  await addMembers(gw.client, room, members);
  const live = await connectAt('br-a', 1, 0);
  const answer = await gw.client.post('/v1/messages/batch', {
    messages: [
      { room, type: 'room.text', data: 0 },
      { to: 'br-a', type: 'direct', data: 1 },
      { room, type: 'room.text', data: 2, client_msg_id: 'batch-room-2' },
      { room: 'no such room', type: 'room.text', data: 3 },
      { room: 'batch-room-unknown', type: 'room.text', data: 4 },
      { room, to: 'br-b', type: 'room.text', data: 5 },
      { room, type: 'room.text', data: 2, client_msg_id: 'batch-room-2' },
      { room, type: 'room.text', data: 7 },
    ],
  });
  assert.equal(answer.status, 200, answer.text);
  type Item = { status: number; id?: string; room?: string; recipients?: unknown; duplicate?: boolean; error?: { code: string; message: string } };
  const results = (answer.body as { results: Item[] }).results;
  assert.deepEqual(results.map((r) => r.status), [201, 201, 201, 400, 404, 400, 200, 201]);
  assert.deepEqual(results.map((r) => r.error?.code), [undefined, undefined, undefined, 'INVALID_REQUEST', 'NOT_FOUND', 'INVALID_REQUEST', undefined, undefined]);
  assert.match(results[3]?.error?.message ?? '', /messages\/3\/room/);
  assert.match(results[4]?.error?.message ?? '', /no room batch-room-unknown/);
  assert.match(results[5]?.error?.message ?? '', /both to and room/);
  for (const i of [0, 2, 7]) {
    assert.deepEqual(results[i], { status: 201, id: results[i]?.id, room, recipients: 3, duplicate: false }, `item ${i}`);
  }
  // Item 6 repeats item 2's client_msg_id in the same batch: one message, appended once.
  assert.deepEqual(results[6], { status: 200, id: results[2]?.id, room, recipients: 3, duplicate: true });

  const roomIds = [results[0]?.id, results[2]?.id, results[7]?.id];
  for (const u of ['br-b', 'br-c']) assert.deepEqual(await inboxIds(u), roomIds, `${u}: the room items in batch order, once each`);
  // br-a is a member and named by the user item between them: all four in batch order.
  const a = await inboxIds('br-a');
  assert.deepEqual(a, [results[0]?.id, results[1]?.id, results[2]?.id, results[7]?.id], 'room and user items in batch order');
  const frames = await live.msgs(4);
  assert.deepEqual(frames.map((f) => f.id), a);
  assert.deepEqual(frames.map((f) => f.room ?? null), a.map((id) => (id === results[1]?.id ? null : room)));
});

test('a retry of a room message after every member left answers the first id (recipients 0), not 404; a new message there is 404 and stores nothing', async () => {
  const room = 'emptied';
  await addMembers(gw.client, room, ['em-a', 'em-b']);
  const body = { room, client_msg_id: 'emptied-1' };
  const first = await postRoom(gw.client, body, { status: 201, recipients: 2 });
  await deleteMembers(gw.client, room, ['em-a', 'em-b']);
  const retried = await postRoom(gw.client, body, { status: 200, recipients: 0 });
  assert.equal(retried.id, first.id);
  const batch = await gw.client.post('/v1/messages/batch', { messages: [{ type: 'room.text', data: { text: 'hello room' }, ...body }] });
  assert.deepEqual((batch.body as { results: unknown[] }).results, [{ status: 200, id: first.id, room, recipients: 0, duplicate: true }]);
  // Another message under the key is still a conflict; a new key is a room not found.
  expectError(await gw.client.post('/v1/messages', { ...body, type: 'room.text', data: 'other' }), 409, 'CONFLICT', /emptied-1/);
  expectError(await gw.client.post('/v1/messages', { room, client_msg_id: 'emptied-2', type: 'room.text', data: 1 }), 404, 'NOT_FOUND', /no room emptied/);
  for (const u of ['em-a', 'em-b']) assert.deepEqual(await inboxIds(u), [first.id], u);
  // Nothing was stored for the refused one: the key is free for a later message once the room has members.
  await addMembers(gw.client, room, ['em-c']);
  await postRoom(gw.client, { room, client_msg_id: 'emptied-2' }, { status: 201, recipients: 1 });
});

test('a batch whose room item and later user item share a client_msg_id: the room item (first) is the message, the user item a 409 naming it', async () => {
  const room = 'key-order';
  await addMembers(gw.client, room, ['ko-a']);
  for (const [first, second] of [['room', 'user'], ['user', 'room']] as const) {
    const key = `key-order-${first}`;
    const item = (kind: 'room' | 'user') => (kind === 'room' ? { room } : { to: 'ko-b' });
    const answer = await gw.client.post('/v1/messages/batch', {
      messages: [{ ...item(first), type: 't', data: 1, client_msg_id: key }, { ...item(second), type: 't', data: 1, client_msg_id: key }],
    });
    type Item = { status: number; id?: string; error?: { code: string; message: string } };
    const [a, b] = (answer.body as { results: Item[] }).results as [Item, Item];
    assert.equal(a.status, 201, `${first} first: ${answer.text}`);
    assert.equal(b.status, 409, answer.text);
    assert.match(b.error?.message ?? '', new RegExp(`"${key}" was first used for another message \\(item 0 of this batch`));
  }
  assert.equal((await inboxIds('ko-a')).length, 1, 'the room message, once');
  assert.equal((await inboxIds('ko-b')).length, 1, 'the user message, once');
});

test('a batch whose room item is refused (no such room) leaves its client_msg_id to a later item of the other kind, as two requests would', async () => {
  const key = 'key-after-404';
  const answer = await gw.client.post('/v1/messages/batch', {
    messages: [
      { room: 'no-such-room', type: 't', data: 1, client_msg_id: key },
      { to: 'ka-a', type: 't', data: 2, client_msg_id: key },
      { room: 'no-such-room', type: 't', data: 1, client_msg_id: key },
    ],
  });
  type Item = { status: number; id?: string; error?: { code: string; message: string } };
  const [a, b, c] = (answer.body as { results: Item[] }).results as [Item, Item, Item];
  assert.equal(a.status, 404, answer.text);
  assert.equal(b.status, 201, `the user item takes the key the refused room item never stored: ${answer.text}`);
  // Now the key is the user message's: a room item naming it is a conflict.
  assert.equal(c.status, 409, answer.text);
  assert.match(c.error?.message ?? '', new RegExp(`"${key}" was first used for another message \\(item 1 of this batch, sent to users`));
  assert.deepEqual(await inboxIds('ka-a'), [b.id]);
});
