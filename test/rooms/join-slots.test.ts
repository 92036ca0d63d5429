/**
 * Join slots never run ahead of the clock (src/rooms/lua/room-add-5.lua,
 * `Rooms.add`): a millisecond holds 1,000 slots; an add that would need a later
 * millisecond's writes nothing and is tried again then. Before, more than 1,000 joins
 * in one millisecond took later milliseconds' slots, and a room message sent in those
 * milliseconds skipped members whose add had already been answered (a fresh review:
 * 5,000 joined at T, a message at T + 2 reached 3,000). A room message's time is never
 * before the room's newest slot (`Rooms.messageTime`), so members whose slots ran ahead
 * of Redis's clock (it stepped back) are among its recipients. A private redis-server.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { ROOM_SCRIPTS, Rooms } from '../../src/rooms/membership.js';
import { evalScript } from '../../src/redis/scripts.js';
import { createRedis } from '../../src/redis/client.js';
import { Keys } from '../../src/redis/keys.js';
import { RedisServer } from '../harness/redis-server.js';

const keys = new Keys('px:');
let server: RedisServer;
let redis: Redis;
let rooms: Rooms;

before(async () => {
  server = await RedisServer.start();
  redis = await createRedis({ url: server.url, commandTimeoutMs: 5000 });
  rooms = new Rooms(redis, keys, 100_000);
});

after(async () => {
  redis?.disconnect();
  await server?.destroy();
});

const users = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

/** `room-add-5.lua` as Rooms.add runs it: KEYS members, cut, top; ARGV cap, nowMs, ahead, users…. */
const roomAdd = (members: string, cut: string, top: string, ...args: string[]): Promise<[number, number]> =>
  evalScript(redis, ROOM_SCRIPTS.add, [members, cut, top], args);

test('an add that would take a later millisecond\'s slots writes nothing and names the millisecond to come back at', async () => {
  const key = keys.roomMembers('full-ms');
  const T = 1_800_000_000_000;
  const cut = keys.roomCut('full-ms');
  const top = keys.roomTop('full-ms');
  assert.deepEqual(await roomAdd(key, cut, top, '100000', String(T), '0', ...users('a', 1000)), [1000, 1000]);
  assert.deepEqual(await roomAdd(key, cut, top, '100000', String(T), '0', 'late'), [-1, T + 1], 'the millisecond is full');
  assert.equal(await redis.zscore(key, 'late'), null, 'nothing written');
  assert.deepEqual(await roomAdd(key, cut, top, '100000', String(T + 1), '0', 'late'), [1, 1001]);
  // Every member's slot is within the millisecond it was added in.
  const slots = (await redis.zrange(key, '0', '-1', 'WITHSCORES')).filter((_, i) => i % 2 === 1).map(Number);
  assert.ok(slots.every((s) => s <= (T + 1) * 1000 + 999));
  assert.equal((await rooms.membersAt('full-ms', T)).length, 1000);
  assert.equal((await rooms.membersAt('full-ms', T + 1)).length, 1001);
  // Asked to, it takes slots ahead (the newest slot far ahead: another node's clock).
  assert.deepEqual(await roomAdd(key, cut, top, '100000', String(T), '1', 'ahead'), [1, 1002]);
});

test('concurrent adds of more than 1,000 members each reach every room message sent after they were answered', async () => {
  const answered = await Promise.all([0, 1, 2, 3, 4].map(async (c) => {
    await rooms.add('burst', users(`u${c}_`, 1000));
    return { c, at: Date.now() };
  }));
  for (const { c, at } of answered) {
    const members = new Set(await rooms.membersAt('burst', at));
    for (const u of users(`u${c}_`, 1000)) assert.ok(members.has(u), `${u}, answered at ${at}, missing from a message sent then`);
  }
});

test('a member added after the newest slot ran ahead of Redis\'s clock (it stepped back) is among the recipients of a room message sent next, and one added after that message is not', async () => {
  const room = 'ahead';
  await rooms.add(room, ['first']);
  // A member who joined while Redis's clock read a minute later than it does now.
  const aheadMs = (await rooms.now()) + 60_000;
  await redis.zadd(keys.roomMembers(room), String(aheadMs * 1000), 'joined-before-step');
  assert.deepEqual(await rooms.add(room, ['late']), { added: 1, size: 3 });
  const ts = await rooms.messageTime(room);
  assert.equal(ts, aheadMs, 'the newest slot\'s millisecond');
  assert.deepEqual(await rooms.membersAt(room, ts), ['first', 'joined-before-step', 'late']);
  // Added after the message: a slot above its ts, so not a recipient of its retries.
  await rooms.add(room, ['later']);
  assert.deepEqual(await rooms.membersAt(room, ts), ['first', 'joined-before-step', 'late']);
  assert.equal(await rooms.messageTime(room), aheadMs + 1, 'the next message reaches it');
});

test('a member added in the millisecond a room message was sent, after it, is not a recipient of its retries', async () => {
  const room = 'same-ms';
  await rooms.add(room, ['first']);
  for (let i = 0; i < 20; i++) {
    const ts = await rooms.messageTime(room);
    await rooms.add(room, [`m${i}`]);
    assert.ok(!(await rooms.membersAt(room, ts)).includes(`m${i}`), `m${i}, added after a message at ${ts}, is among its recipients`);
  }
  const now = await rooms.now();
  assert.ok(Math.abs((await rooms.messageTime('no-such-room')) - now) < 1000, 'a room without members: Redis\'s clock');
});

test('an add completes while room messages are sent every millisecond (each moves the cut on), and the next message reaches the member', async () => {
  const room = 'busy';
  await rooms.add(room, ['first']);
  let sending = true;
  const sender = (async () => {
    while (sending) await rooms.messageTime(room);
  })();
  try {
    const added = await Promise.race([
      rooms.add(room, ['newcomer']),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the add waited 5 s behind the room messages')), 5000).unref()),
    ]);
    assert.deepEqual(added, { added: 1, size: 2 });
  } finally {
    sending = false;
    await sender;
  }
  assert.ok((await rooms.membersAt(room, await rooms.messageTime(room))).includes('newcomer'));
});

test('a room message sent while Redis\'s clock reads behind the room\'s cut leaves the cut where it was: a member added next is no recipient of the earlier message\'s retries', async () => {
  const room = 'cut-ahead';
  await rooms.add(room, ['first']);
  // A room message sent while Redis's clock read a minute later (it stepped back since): its ts is the cut.
  const aheadMs = (await rooms.now()) + 60_000;
  await redis.set(keys.roomCut(room), String(aheadMs), 'PX', 120_000);
  assert.ok(await rooms.messageTime(room) < aheadMs, 'a message sent now is at Redis\'s clock');
  assert.equal(await redis.get(keys.roomCut(room)), String(aheadMs), 'the cut is not moved back');
  await rooms.add(room, ['late']);
  assert.deepEqual(await rooms.membersAt(room, aheadMs), ['first'], 'a retry of the message at the cut does not reach "late"');
});

test('a room message\'s cut is kept until a minute after Redis\'s clock reaches its ts, also a ts ahead of the clock', async () => {
  const room = 'cut-expiry';
  await rooms.add(room, ['first']);
  // A member who joined while Redis's clock read two minutes later: the message's ts is that millisecond.
  const aheadMs = (await rooms.now()) + 120_000;
  await redis.zadd(keys.roomMembers(room), String(aheadMs * 1000), 'joined-ahead');
  assert.equal(await rooms.messageTime(room), aheadMs);
  const expires = await redis.pexpiretime(keys.roomCut(room));
  assert.ok(Math.abs(expires - (aheadMs + 60_000)) < 1000, `the cut expires at ${expires}, not ${aheadMs + 60_000}`);
});
