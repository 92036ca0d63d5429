/**
 * Join slots at their edges (src/rooms/lua/room-add-5.lua, `Rooms.now`): an add whose
 * first slot fits in the millisecond but whose last would not writes nothing (slots
 * never run ahead of the clock, also part-way through a millisecond), and Redis's
 * clock is read to the millisecond.
 *
 * A slot is never given twice in a room: a new member's slot is above every slot the
 * room gave before, also that of a member removed since, so a member listing's page
 * cursor (the last listed member's slot) never skips a newcomer. Before, slots started
 * after the newest member only: when the member at the cursor was the newest and was
 * removed, the next member added in the same millisecond, or while slots ran ahead of
 * Redis's clock, took its slot, and the next page (`(cursor`) never listed it (a
 * review's finding, L1: page 1 [a, b], DELETE b, c, PUT d, page 2 []). Also: a room
 * written without the top key (an older release) goes on after its newest member, a
 * room emptied and re-created lists its new members, and who receives a room message
 * is unchanged. A private redis-server.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { ROOM_SCRIPTS, Rooms } from '../../src/rooms/membership.js';
import { evalScript } from '../../src/redis/scripts.js';
import { createRedis } from '../../src/redis/client.js';
import { Keys } from '../../src/redis/keys.js';
import { fileRedis } from '../harness/file-redis.js';

const keys = new Keys('px:');
let redis: Redis;
let rooms: Rooms;

fileRedis(async ({ redis: server, cleanup }) => {
  redis = await createRedis({ url: server.url, commandTimeoutMs: 5000 });
  cleanup.after(() => redis.disconnect());
  rooms = new Rooms(redis, keys, 100_000);
});

const users = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

/** `room-add-5.lua` as Rooms.add runs it: KEYS members, cut, top; ARGV cap, nowMs, ahead, users…. */
const roomAdd = (members: string, cut: string, top: string, ...args: string[]): Promise<[number, number]> =>
  evalScript(redis, ROOM_SCRIPTS.add, [members, cut, top], args);

test('an add whose first slot fits in the millisecond but whose last does not writes nothing and names the next millisecond', async () => {
  const key = keys.roomMembers('part-full');
  const cut = keys.roomCut('part-full');
  const top = keys.roomTop('part-full');
  const T = 1_800_000_000_000;
  assert.deepEqual(await roomAdd(key, cut, top, '100000', String(T), '0', ...users('a', 600)), [600, 600]);
  // Slots T*1000+600 .. T*1000+1099: the last 100 would be the next millisecond's.
  assert.deepEqual(await roomAdd(key, cut, top, '100000', String(T), '0', ...users('b', 500)), [-1, T + 1]);
  assert.equal(await redis.zcard(key), 600, 'nothing written');
  // 400 fit exactly.
  assert.deepEqual(await roomAdd(key, cut, top, '100000', String(T), '0', ...users('c', 400)), [400, 1000]);
  assert.equal((await rooms.membersAt('part-full', T)).length, 1000);
});

test('Rooms.now is Redis\'s clock to the millisecond', async () => {
  for (let i = 0; i < 5; i++) {
    const ms = async (): Promise<number> => {
      const [sec, usec] = await redis.time();
      return Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
    };
    const before = await ms();
    const now = await rooms.now();
    const after = await ms();
    assert.ok(before <= now && now <= after, `${now} not within ${before}..${after}`);
  }
});

test('room-add-5 refuses a cap below 1, a negative now and a call naming no user, and writes nothing', async () => {
  const key = keys.roomMembers('bad-args');
  const cut = keys.roomCut('bad-args');
  const top = keys.roomTop('bad-args');
  const refused = { message: 'INVALID_REQUEST cap, now and at least one user are required' };
  await assert.rejects(roomAdd(key, cut, top, '0', '1800000000000', '0', 'u'), refused);
  await assert.rejects(roomAdd(key, cut, top, '10', '-1', '0', 'u'), refused);
  await assert.rejects(roomAdd(key, cut, top, '10', '1800000000000', '0'), refused);
  assert.equal(await redis.exists(key), 0);
});

/** Every member of `room` by slot, as [user, slot] pairs. */
async function slots(room: string): Promise<[string, number][]> {
  const flat = await redis.zrange(keys.roomMembers(room), '0', '-1', 'WITHSCORES');
  const out: [string, number][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i] as string, Number(flat[i + 1])]);
  return out;
}

/**
 * `room-add-5.lua` at a given `now`, ms (slots within one millisecond, whatever the time
 * the test takes); `ahead`: take slots ahead of `now` if need be.
 */
function addAt(room: string, nowMs: number, users: string[], ahead = false): Promise<[number, number]> {
  return roomAdd(keys.roomMembers(room), keys.roomCut(room), keys.roomTop(room), '100000', String(nowMs), ahead ? '1' : '0', ...users);
}

test('a member added after the newest member, the last one listed, was removed is on the next page (slots ahead of Redis\'s clock)', async () => {
  const room = 'ahead';
  await rooms.add(room, ['a']);
  // `a` joined while Redis's clock read a minute later than it does now (it stepped
  // back since): b and c take slots after it, ahead of the clock.
  const aheadMs = (await rooms.now()) + 60_000;
  await redis.zadd(keys.roomMembers(room), String(aheadMs * 1000), 'a');
  assert.deepEqual(await rooms.add(room, ['b', 'c']), { added: 2, size: 3 });
  const page1 = await rooms.list(room, undefined, 2);
  assert.deepEqual(page1.members, ['a', 'b']);
  assert.equal(page1.nextCursor, String(aheadMs * 1000 + 1), 'b\'s slot');
  assert.deepEqual(await rooms.remove(room, ['b', 'c']), { removed: 2, size: 1 });
  assert.deepEqual(await rooms.add(room, ['d']), { added: 1, size: 2 });
  assert.deepEqual(await slots(room), [['a', aheadMs * 1000], ['d', aheadMs * 1000 + 3]], 'd takes neither b\'s nor c\'s slot');
  assert.deepEqual(await rooms.list(room, page1.nextCursor ?? undefined, 2), { members: ['d'], size: 2, nextCursor: null });
});

test('a member added in the millisecond the newest member, the last one listed, was removed in is on the next page', async () => {
  const room = 'same-ms';
  const T = 1_800_000_000_000;
  assert.deepEqual(await addAt(room, T, ['a', 'b', 'c']), [3, 3]);
  const page1 = await rooms.list(room, undefined, 2);
  assert.deepEqual(page1, { members: ['a', 'b'], size: 3, nextCursor: String(T * 1000 + 1) });
  await rooms.remove(room, ['b', 'c']);
  assert.deepEqual(await addAt(room, T, ['d']), [1, 2]);
  assert.deepEqual(await rooms.list(room, page1.nextCursor ?? undefined, 2), { members: ['d'], size: 2, nextCursor: null });
  // Removed and added again: a new join, last, after every slot given.
  await rooms.remove(room, ['d']);
  assert.deepEqual(await addAt(room, T, ['b']), [1, 2]);
  assert.deepEqual(await slots(room), [['a', T * 1000], ['b', T * 1000 + 4]]);
});

/** Time a PTTL may have counted down between a script's write and its read, ms. */
const SLACK_MS = 5_000;

test('the top key holds the highest slot given and expires a minute after Redis\'s clock passes it; a room without it (an older release\'s) goes on after its newest member', async () => {
  const room = 'older-release';
  const T = 1_800_000_000_000;
  // Members written without the top key, as room-add-4 did.
  await redis.zadd(keys.roomMembers(room), String(T * 1000 + 5), 'old');
  assert.equal(await redis.exists(keys.roomTop(room)), 0);
  assert.deepEqual(await addAt(room, T, ['new']), [1, 2]);
  assert.deepEqual(await slots(room), [['old', T * 1000 + 5], ['new', T * 1000 + 6]]);
  assert.equal(await redis.get(keys.roomTop(room)), String(T * 1000 + 6));
  // `now` is T: the key lives a minute past it. PTTL counts down from the script's
  // write: SLACK_MS for the round trips between them on a loaded machine, far less
  // than a wrong expiry would be off by (a minute).
  const ttl = await redis.pttl(keys.roomTop(room));
  assert.ok(ttl > 60_000 - SLACK_MS && ttl <= 60_000, `the top expires in ${ttl} ms, not a minute`);
  // Slots a minute ahead of `now`: kept until a minute after the clock reaches them.
  await addAt(room, T - 60_000, ['later'], true);
  const ahead = await redis.pttl(keys.roomTop(room));
  assert.ok(ahead > 120_000 - SLACK_MS && ahead <= 120_000, `the top expires in ${ahead} ms, not two minutes`);
  // A top key below the newest member (a member added by an older release since) is passed over.
  await redis.zadd(keys.roomMembers(room), String(T * 1000 + 50), 'older-again');
  assert.deepEqual(await addAt(room, T, ['newest']), [1, 5]);
  assert.equal(await redis.zscore(keys.roomMembers(room), 'newest'), String(T * 1000 + 51));
});

test('a room emptied and added to again lists its new members, after a cursor of the old ones too, and exists only while it has members', async () => {
  const room = 'again';
  const T = 1_800_000_000_000;
  await addAt(room, T, ['a', 'b']);
  const page1 = await rooms.list(room, undefined, 1);
  assert.deepEqual(page1.members, ['a']);
  await rooms.remove(room, ['a', 'b']);
  assert.equal(await rooms.size(room), 0, 'no members: no room (404 over HTTP)');
  assert.equal(await redis.exists(keys.roomMembers(room)), 0);
  assert.deepEqual(await addAt(room, T, ['c']), [1, 1]);
  assert.deepEqual(await rooms.list(room, undefined, 10), { members: ['c'], size: 1, nextCursor: null });
  assert.deepEqual(await rooms.list(room, page1.nextCursor ?? undefined, 10), { members: ['c'], size: 1, nextCursor: null });
});

test('who gets a room message is unchanged: the members at its send, and a member added after it is no recipient of its retries, also after the newest member left', async () => {
  const room = 'recipients';
  await rooms.add(room, ['a']);
  const aheadMs = (await rooms.now()) + 60_000;
  await redis.zadd(keys.roomMembers(room), String(aheadMs * 1000), 'a');
  await rooms.add(room, ['b']);
  await rooms.remove(room, ['b']);
  const ts = await rooms.messageTime(room);
  assert.equal(ts, aheadMs, 'the newest member\'s millisecond');
  assert.deepEqual(await rooms.membersAt(room, ts), ['a']);
  await rooms.add(room, ['c']);
  assert.deepEqual(await rooms.membersAt(room, ts), ['a'], 'c, added after the message, is no recipient of its retries');
  const next = await rooms.messageTime(room);
  assert.deepEqual(await rooms.membersAt(room, next), ['a', 'c'], 'the next message reaches c');
});
