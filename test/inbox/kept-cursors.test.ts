/**
 * Ack cursors across a new epoch (rotate-7.lua step 3, append-11.lua step 5, ack-5.lua;
 * docs/decisions.md "Stored cursors across a new epoch"): a rotation moves each device's
 * cursor out of the acks hash into the meta hash with the epoch it counts in, so a
 * device resuming from it is reset (Inbox.deviceCursor names that epoch) rather than
 * taken for a new device; the device's first cursor of the new epoch replaces it; an ack
 * still of the old epoch moves it forward but never makes one; cursors kept of older
 * epochs stay through a later rotation, bounded by the most device cursors.
 * Real Redis (a private redis-server), no mocks.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { RedisServer } from '../harness/redis-server.js';
import { openInbox } from '../harness/checks.js';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { Inbox, type InboxOptions } from '../../src/inbox/inbox.js';
import { Keys } from '../../src/redis/keys.js';

const keys = new Keys('kc:');

/** A private redis-server for the test, a client on it, and an Inbox with `opts` (prefix `kc:`, cap 100). */
async function privateInbox(t: TestContext, opts: Partial<InboxOptions> = {}): Promise<{ inbox: Inbox; redis: Redis }> {
  const own = await RedisServer.start();
  t.after(() => own.destroy());
  const { redis } = await openInbox(t, own.url, 'kc:');
  return { inbox: new Inbox(redis, { prefix: 'kc:', cap: 100, ...opts }), redis };
}

/** Appends `count` messages to `uid` (MsgIDs from `base`); returns the epoch of the last. */
async function appendMany(inbox: Inbox, uid: string, count: number, base: number): Promise<string> {
  let epoch = '';
  for (let i = 0; i < count; i++) epoch = (await inbox.append(uid, encodeMsgId({ partition: 0, kind: MsgKind.user, counter: base + i }), MsgKind.user)).epoch;
  return epoch;
}

/** The meta hash's kept cursors, field → value. */
async function kept(redis: Redis, uid: string): Promise<Record<string, string>> {
  const meta = await redis.hgetall(keys.meta(uid));
  return Object.fromEntries(Object.entries(meta).filter(([field]) => field.startsWith('cursor ')));
}

test('a rotation keeps each cursor with its epoch; the device\'s first ack of the new epoch replaces it, and an ack of the old one moves it forward, never makes one', async (t) => {
  const { inbox, redis } = await privateInbox(t);
  const uid = 'kira';
  const e1 = await appendMany(inbox, uid, 5, 1);
  await inbox.ack(uid, 'phone', 3, e1);
  await inbox.ack(uid, 'laptop', 5, e1);
  const e2 = await inbox.rotateEpoch(uid, e1) as string;
  assert.deepEqual(await inbox.cursors(uid), {}, 'no cursor of the new epoch yet');
  assert.deepEqual(await kept(redis, uid), { 'cursor phone': `3 ${e1}`, 'cursor laptop': `5 ${e1}` });
  assert.deepEqual(await inbox.deviceCursor(uid, 'phone'), { seq: 3, epoch: e1 }, 'the phone resumes from 3 of the old epoch: a reset');

  // An ack of the old epoch, in flight as the rotation came: the kept cursor moves forward, never back.
  assert.equal(await inbox.ack(uid, 'phone', 4, e1), 0, 'no cursor of the current epoch');
  assert.equal(await inbox.ack(uid, 'phone', 2, e1), 0);
  assert.deepEqual(await inbox.deviceCursor(uid, 'phone'), { seq: 4, epoch: e1 });
  // Nor is one made for a device that had none (the epoch of an ack is the client's word).
  await inbox.ack(uid, 'tablet', 5, e1);
  assert.equal(await inbox.deviceCursor(uid, 'tablet'), undefined);
  await inbox.ack(uid, 'phone', 5, 'some-other-epoch');
  assert.deepEqual(await inbox.deviceCursor(uid, 'phone'), { seq: 4, epoch: e1 }, 'an ack of another epoch moves nothing');

  // The phone's first ack of the new epoch replaces the kept one.
  assert.equal(await inbox.ack(uid, 'phone', 1, e2), 1);
  assert.deepEqual(await inbox.deviceCursor(uid, 'phone'), { seq: 1, epoch: e2 });
  assert.deepEqual(await kept(redis, uid), { 'cursor laptop': `5 ${e1}` });
});

test('a device away through two rotations (a node\'s own detection, then `pixiu redis lost-writes`) keeps its cursor of the first epoch', async (t) => {
  const gen = { value: 0 };
  const { inbox } = await privateInbox(t, { generation: () => gen.value });
  const uid = 'lars';
  const e1 = await appendMany(inbox, uid, 3, 100);
  await inbox.ack(uid, 'phone', 3, e1);
  const e2 = await inbox.rotateEpoch(uid, e1) as string;
  await inbox.ack(uid, 'laptop', 2, e2);
  gen.value = 5;
  const e3 = await appendMany(inbox, uid, 1, 200);
  assert.ok(e3 !== e2 && e3 !== e1, 'the generation rotated it again');
  assert.deepEqual(await inbox.deviceCursor(uid, 'phone'), { seq: 3, epoch: e1 });
  assert.deepEqual(await inbox.deviceCursor(uid, 'laptop'), { seq: 2, epoch: e2 });
});

test('cursors kept of older epochs are bounded by the most device cursors, those of the epoch just replaced first', async (t) => {
  const { inbox, redis } = await privateInbox(t, { deviceCursors: 3 });
  const uid = 'mona';
  const e1 = await appendMany(inbox, uid, 2, 300);
  for (const device of ['a', 'b', 'c']) await inbox.ack(uid, device, 1, e1);
  const e2 = await inbox.rotateEpoch(uid, e1) as string;
  for (const device of ['d', 'e']) await inbox.ack(uid, device, 2, e2);
  await inbox.rotateEpoch(uid, e2);
  // d and e (just replaced) stay, and one of a..c (by field name): 3 in all.
  assert.deepEqual(await kept(redis, uid), { 'cursor a': `1 ${e1}`, 'cursor d': `2 ${e2}`, 'cursor e': `2 ${e2}` });
});

test('an inbox created afresh (Redis lost its meta hash) drops the cursors: no epoch to name', async (t) => {
  const { inbox, redis } = await privateInbox(t);
  const uid = 'nils';
  const k = keys.user(uid);
  const e1 = await appendMany(inbox, uid, 2, 400);
  await inbox.ack(uid, 'phone', 2, e1);
  await redis.del(k.meta, k.inbox, k.ids);
  await appendMany(inbox, uid, 1, 500);
  assert.equal(await inbox.deviceCursor(uid, 'phone'), undefined, 'a new device: nothing can be told');
});
