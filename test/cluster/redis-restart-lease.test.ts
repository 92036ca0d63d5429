/**
 * A Redis restarted empty (DESIGN.md §9; src/service/service.ts): as soon as the node is
 * connected again, it writes its claim and store lease back together with its node
 * registration, not at its next lease renewal (up to 5 s later), during which the
 * other nodes could not read this node's messages (UNAVAILABLE) and a new data dir
 * could take its block. A private redis-server without persistence; one node in process.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import { openInbox, waitUntil } from '../harness/checks.js';
import { cleanupList, startInProcess } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

const PREFIX = 'rr:';
const keys = new Keys(PREFIX);
const cleanup = cleanupList();
let redis: RedisServer;
let direct: Redis;

before(async () => {
  redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  await startInProcess(cleanup, { redisUrl: redis.url, redisPrefix: PREFIX, storeDurability: 'relaxed' });
  direct = (await openInbox(cleanup, redis.url, PREFIX)).redis;
});

after(() => cleanup.run());

/** `check`, false while the test's own client is still reconnecting (it queues nothing offline). */
async function answers(check: () => Promise<boolean>): Promise<boolean> {
  try {
    return await check();
  } catch {
    return false;
  }
}

test('after Redis restarted empty, the claim and the lease are back as soon as the node is registered again', { timeout: 30_000 }, async () => {
  const storeId = (await direct.hgetall(keys.storePartitions()))['0'];
  assert.ok(storeId !== undefined);
  await redis.kill();
  await redis.restart();
  // The node registers again on its reconnect (node-registry.ts), the same moment.
  await waitUntil('the node registered again', () => answers(async () => (await direct.zcard(keys.nodes())) > 0), 10_000, 20);
  await waitUntil('claim and lease written back', async () =>
    (await direct.hget(keys.storePartitions(), '0')) === storeId && (await direct.exists(keys.storeLease(storeId))) === 1, 500, 20);
});
