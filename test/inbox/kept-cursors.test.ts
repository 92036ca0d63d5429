/**
 * Ack cursors across a new epoch (rotate-7.lua step 3, append-13.lua step 5, ack-7.lua;
 * docs/decisions.md "Stored cursors across a new epoch"): a rotation moves each device's
 * cursor out of the acks hash into the meta hash with the epoch it counts in, so a
 * device resuming from it is reset (Inbox.deviceCursor names that epoch) rather than
 * taken for a new device; the device's first cursor of the new epoch replaces it; an ack
 * still of the old epoch moves it forward, and makes it for a device that had none when
 * the inbox's lineage shows its epoch replaced the ack's (the ack was on its way as the
 * rotation came), within the most device cursors, never for another epoch; cursors kept
 * of older epochs stay through a later rotation, bounded by the most device cursors.
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

test('a rotation keeps each cursor with its epoch; the device\'s first ack of the new epoch replaces it, and an ack of the old one moves it forward, never back', async (t) => {
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
  assert.equal(await inbox.ack(uid, 'phone', 4, e1), null, 'not the inbox\'s epoch: no cursor of the current one');
  assert.equal(await inbox.ack(uid, 'phone', 2, e1), null);
  assert.deepEqual(await inbox.deviceCursor(uid, 'phone'), { seq: 4, epoch: e1 });
  await inbox.ack(uid, 'phone', 5, 'some-other-epoch');
  assert.deepEqual(await inbox.deviceCursor(uid, 'phone'), { seq: 4, epoch: e1 }, 'an ack of another epoch moves nothing');

  // The phone's first ack of the new epoch replaces the kept one.
  assert.equal(await inbox.ack(uid, 'phone', 1, e2), 1);
  assert.deepEqual(await inbox.deviceCursor(uid, 'phone'), { seq: 1, epoch: e2 });
  assert.deepEqual(await kept(redis, uid), { 'cursor laptop': `5 ${e1}` });
});

test('a device\'s first ack of the epoch just replaced, on its way as the rotation came, makes its kept cursor; an ack of any other epoch makes none', async (t) => {
  const { inbox, redis } = await privateInbox(t);
  const uid = 'olga';
  const k = keys.user(uid);
  const e1 = await appendMany(inbox, uid, 5, 600);
  await inbox.ack(uid, 'laptop', 5, e1);
  // A resume claim's rotation that read the latest as 3: the new epoch vouches for seqs up to 3.
  const e2 = await inbox.rotateEpoch(uid, e1, 60_000, 3) as string;
  assert.equal(await redis.hget(k.meta, 'lineage'), `${e2} ${e1} 3`);

  assert.equal(await inbox.ack(uid, 'phone', 2, e1), null, 'not the inbox\'s epoch: no cursor of the current one');
  assert.deepEqual(await inbox.deviceCursor(uid, 'phone'), { seq: 2, epoch: e1 }, 'the phone resumes from 2 of the old epoch: a reset');
  await inbox.ack(uid, 'phone', 1, e1);
  assert.deepEqual(await inbox.deviceCursor(uid, 'phone'), { seq: 2, epoch: e1 }, 'then moves forward only');
  // Above `through`: kept as acked (seqs of e1 the node sent); the resume marks `redelivered` only up to 3 (resume.ts hadAfterReset).
  await inbox.ack(uid, 'tablet', 5, e1);
  assert.deepEqual(await inbox.deviceCursor(uid, 'tablet'), { seq: 5, epoch: e1 });

  // Nothing for: a made-up epoch, a seq of 0, a device that has acked under the current epoch since.
  await inbox.ack(uid, 'watch', 4, 'no-such-epoch');
  await inbox.ack(uid, 'tv', 0, e1);
  assert.equal(await inbox.ack(uid, 'car', 1, e2), 1);
  assert.equal(await inbox.ack(uid, 'car', 4, e1), null);
  assert.equal(await inbox.deviceCursor(uid, 'watch'), undefined);
  assert.equal(await inbox.deviceCursor(uid, 'tv'), undefined);
  assert.deepEqual(await inbox.deviceCursor(uid, 'car'), { seq: 1, epoch: e2 }, 'its cursor of the current epoch is newer');
  assert.deepEqual(await kept(redis, uid), { 'cursor laptop': `5 ${e1}`, 'cursor phone': `2 ${e1}`, 'cursor tablet': `5 ${e1}` });

  // Two rotations on: the lineage names e2, so an ack of e1 makes nothing; one of e2 replaces the phone's kept cursor of e1.
  const e3 = await inbox.rotateEpoch(uid, e2) as string;
  await inbox.ack(uid, 'watch', 4, e1);
  assert.equal(await inbox.deviceCursor(uid, 'watch'), undefined, 'the lineage names another epoch');
  await inbox.ack(uid, 'phone', 3, e2);
  assert.deepEqual(await inbox.deviceCursor(uid, 'phone'), { seq: 3, epoch: e2 }, 'as had it landed before the rotation to e3');
  assert.equal(await redis.hget(k.meta, 'epoch'), e3);
});

test('no kept cursor is made for an ack of an inbox Redis lost (no lineage), nor past the most device cursors, where a device\'s own of an older epoch is still replaced', async (t) => {
  const { inbox, redis } = await privateInbox(t, { deviceCursors: 2 });
  const uid = 'pia';
  const k = keys.user(uid);
  const e1 = await appendMany(inbox, uid, 2, 700);
  await redis.del(k.meta, k.inbox, k.ids);
  const e2 = await appendMany(inbox, uid, 1, 800);
  assert.notEqual(e2, e1);
  await inbox.ack(uid, 'phone', 2, e1);
  assert.equal(await inbox.deviceCursor(uid, 'phone'), undefined, 'an epoch created afresh continues nothing');

  // Two kept cursors of e2 (the most), then late acks of e2 after the rotation to e3.
  await inbox.ack(uid, 'a', 1, e2);
  await inbox.ack(uid, 'b', 1, e2);
  await inbox.rotateEpoch(uid, e2);
  await inbox.ack(uid, 'c', 1, e2);
  assert.equal(await inbox.deviceCursor(uid, 'c'), undefined, 'none made past the most: no other device\'s is dropped');
  await inbox.ack(uid, 'a', 1, e2);
  assert.deepEqual(await kept(redis, uid), { 'cursor a': `1 ${e2}`, 'cursor b': `1 ${e2}` });

  // At the most still, a late ack replaces the device's own kept cursor of an older epoch (no field added).
  const e3 = await redis.hget(k.meta, 'epoch') as string;
  await inbox.ack(uid, 'c', 1, e3);
  await inbox.rotateEpoch(uid, e3);
  assert.deepEqual(await kept(redis, uid), { 'cursor a': `1 ${e2}`, 'cursor c': `1 ${e3}` }, 'c just moved, then a by field name');
  await inbox.ack(uid, 'a', 1, e3);
  assert.deepEqual(await kept(redis, uid), { 'cursor a': `1 ${e3}`, 'cursor c': `1 ${e3}` }, 'a\'s first ack of e3, on its way as e3 was replaced');
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
