/**
 * Which nodes a data dir moved to another key prefix would split from
 * (src/cluster/prefix-guard.ts `liveNodesUnder`): the nodes registered under the
 * recorded prefix, less this data dir's own node of its last run — killed moments ago,
 * its registration not lapsed yet (up to 15 s), it is no other node. Counted, the
 * restart of a killed node under a new prefix was refused as a cluster split with only
 * itself named as running, until its old registration lapsed. A private redis-server.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { liveNodesUnder } from '../../src/cluster/prefix-guard.js';
import { Keys } from '../../src/redis/keys.js';
import { openInbox } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';

let redis: Redis;

fileRedis(async ({ redis: server, cleanup }) => {
  redis = (await openInbox(cleanup, server.url)).redis;
});

test('the registered nodes under a prefix leave out the node of the data dir\'s own store, and only it', async () => {
  const keys = new Keys('p:');
  const [seconds] = await redis.time();
  const expiry = String(Number(seconds) * 1000 + 60_000);
  // The data dir's own node of its last run (killed), another data dir's node, and a
  // node whose entry names no store (a node of an older version).
  await redis.zadd(keys.nodes(), expiry, 'node-own', expiry, 'node-other', expiry, 'node-old');
  await redis.hset(keys.nodeSettings(),
    'node-own', JSON.stringify({ store: 'store-own', inboxCap: 1000 }),
    'node-other', JSON.stringify({ store: 'store-other', inboxCap: 1000 }),
    'node-old', JSON.stringify({ inboxCap: 1000 }));
  assert.deepEqual(await liveNodesUnder(redis, 'p:', 'store-own'), ['node-old', 'node-other']);
  assert.deepEqual(await liveNodesUnder(redis, 'p:', undefined), ['node-old', 'node-other', 'node-own']);
});
