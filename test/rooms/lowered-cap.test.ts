/**
 * A room size cap lowered below a room's size (a restart with a smaller `roomSizeCap`):
 * a PUT that names only members already in adds nobody, so it cannot take the room over
 * the cap and is answered as any such call is ({added: 0}); room-add-3.lua refused it
 * ("room would have 5 members, over the cap of 3"), which also failed a producer's
 * retry of an add that went through. Adding a new member stays refused. A private
 * redis-server.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isPixiuError } from '../../src/errors.js';
import { Rooms } from '../../src/rooms/membership.js';
import { createRedis } from '../../src/redis/client.js';
import { Keys } from '../../src/redis/keys.js';
import { fileRedis } from '../harness/file-redis.js';

let wide: Rooms;
let narrow: Rooms;

fileRedis(async ({ redis: server, cleanup }) => {
  const redis = await createRedis({ url: server.url, commandTimeoutMs: 5000 });
  cleanup.after(() => redis.disconnect());
  const keys = new Keys('px:');
  wide = new Rooms(redis, keys, 5);
  narrow = new Rooms(redis, keys, 3);
});

test('with the cap lowered below the room\'s size, naming only members already in adds nobody and is no error', async () => {
  assert.deepEqual(await wide.add('shrunk', ['a', 'b', 'c', 'd', 'e']), { added: 5, size: 5 });
  await assert.rejects(narrow.add('shrunk', ['a', 'f']), (err) => isPixiuError(err, 'INVALID_REQUEST'), 'a new member is still refused');
  assert.deepEqual(await narrow.add('shrunk', ['a', 'e']), { added: 0, size: 5 });
});
