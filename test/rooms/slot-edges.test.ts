/**
 * Join slots at their edges (src/rooms/lua/room-add-4.lua, `Rooms.now`): an add whose
 * first slot fits in the millisecond but whose last would not writes nothing (slots
 * never run ahead of the clock, also part-way through a millisecond), and Redis's
 * clock is read to the millisecond. A private redis-server.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Rooms } from '../../src/rooms/membership.js';
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

test('an add whose first slot fits in the millisecond but whose last does not writes nothing and names the next millisecond', async () => {
  const key = keys.roomMembers('part-full');
  const cut = keys.roomCut('part-full');
  const T = 1_800_000_000_000;
  assert.deepEqual(await redis.pxRoomAddV5(key, cut, '100000', String(T), '0', ...users('a', 600)), [600, 600]);
  // Slots T*1000+600 .. T*1000+1099: the last 100 would be the next millisecond's.
  assert.deepEqual(await redis.pxRoomAddV5(key, cut, '100000', String(T), '0', ...users('b', 500)), [-1, T + 1]);
  assert.equal(await redis.zcard(key), 600, 'nothing written');
  // 400 fit exactly.
  assert.deepEqual(await redis.pxRoomAddV5(key, cut, '100000', String(T), '0', ...users('c', 400)), [400, 1000]);
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

test('room-add-4 refuses a cap below 1, a negative now and a call naming no user, and writes nothing', async () => {
  const key = keys.roomMembers('bad-args');
  const cut = keys.roomCut('bad-args');
  const refused = { message: 'INVALID_REQUEST cap, now and at least one user are required' };
  await assert.rejects(redis.pxRoomAddV5(key, cut, '0', '1800000000000', '0', 'u'), refused);
  await assert.rejects(redis.pxRoomAddV5(key, cut, '10', '-1', '0', 'u'), refused);
  await assert.rejects(redis.pxRoomAddV5(key, cut, '10', '1800000000000', '0'), refused);
  assert.equal(await redis.exists(key), 0);
});
