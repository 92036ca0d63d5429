/**
 * Compare-and-delete (src/redis/delete-if.ts, lua/delete-if-1.lua) on a real
 * redis-server: the key goes only while it holds the caller's value, and the answer
 * says whether it went.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { createRedis } from '../../src/redis/client.js';
import { DELETE_IF, deleteIf } from '../../src/redis/delete-if.js';
import { defineScripts } from '../../src/redis/scripts.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

let server: RedisServer;
let redis: Redis;
const files = cleanupList();

before(async () => {
  server = await RedisServer.start();
  files.after(() => server.destroy());
  redis = await createRedis({ url: server.url, commandTimeoutMs: 5000 });
  files.after(() => redis.quit());
  defineScripts(redis, [DELETE_IF]);
});

after(() => files.run());

test('deleteIf deletes a key holding the value and answers true; a key holding another value, or none, is left and answers false', async () => {
  await redis.set('lease:mine', 'node-a');
  assert.equal(await deleteIf(redis, 'lease:mine', 'node-a'), true);
  assert.equal(await redis.exists('lease:mine'), 0);

  await redis.set('lease:taken', 'node-b');
  assert.equal(await deleteIf(redis, 'lease:taken', 'node-a'), false);
  assert.equal(await redis.get('lease:taken'), 'node-b', 'another writer\'s value is kept');

  assert.equal(await deleteIf(redis, 'lease:absent', 'node-a'), false);
});
