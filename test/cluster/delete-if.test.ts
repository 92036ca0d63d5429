/**
 * Compare-and-delete (src/redis/delete-if.ts, lua/delete-if-1.lua) on a real
 * redis-server: the key goes only while it holds the caller's value, and the answer
 * says whether it went. And how loadScripts (src/redis/scripts.ts) loads it: at once
 * on a connected client, and a refused SCRIPT LOAD is harmless.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { createRedis } from '../../src/redis/client.js';
import { DELETE_IF, deleteIf } from '../../src/redis/delete-if.js';
import { loadScripts, scriptSha, sendEvalsha } from '../../src/redis/scripts.js';
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
  loadScripts(redis, [DELETE_IF]);
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

test('a script given to loadScripts on a connected client is loaded at once: a bare EVALSHA sent next finds it (sendEvalsha has no NOSCRIPT fallback)', async (t) => {
  await redis.script('FLUSH');
  const fresh = await createRedis({ url: server.url, commandTimeoutMs: 5000 });
  t.after(() => fresh.quit());
  await fresh.set('lease:fresh', 'node-a');
  loadScripts(fresh, [DELETE_IF]);
  assert.equal(await sendEvalsha(fresh, [scriptSha(DELETE_IF), '1', 'lease:fresh', 'node-a']), 1);
  assert.equal(await fresh.exists('lease:fresh'), 0);
});

test('a Redis user refused SCRIPT still runs the script (EVAL once EVALSHA misses), and the refused load rejects nothing', async (t) => {
  await redis.call('ACL', 'SETUSER', 'noscript', 'on', '>noscript-password', '~*', '&*', '+@all', '-script');
  const limited = await createRedis({ url: server.url.replace('redis://', 'redis://noscript:noscript-password@'), commandTimeoutMs: 5000 });
  t.after(async () => {
    await limited.quit();
    await redis.call('ACL', 'DELUSER', 'noscript');
  });
  await redis.script('FLUSH');
  loadScripts(limited, [DELETE_IF]);
  await limited.set('lease:limited', 'node-a');
  assert.equal(await deleteIf(limited, 'lease:limited', 'node-a'), true);
  assert.equal(await limited.exists('lease:limited'), 0);
});
