/**
 * A Redis restarted empty (DESIGN.md §9; src/service/service.ts, node-registry.ts): as
 * soon as the node is connected again, it writes its node registration, its claim and
 * its store lease back, not at their next renewal (up to 5 s later), during which the
 * other nodes would take it for gone (pruning its users' presence), could not read its
 * messages (UNAVAILABLE), and a new data dir could take its block. A private redis-server without persistence; one node in process.
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

test('after Redis restarted empty, the node\'s registration, claim and lease are all back as soon as it has reconnected', { timeout: 30_000 }, async () => {
  const storeId = (await direct.hgetall(keys.storePartitions()))['0'];
  assert.ok(storeId !== undefined);
  await redis.kill();
  await redis.restart();
  const registered = async (): Promise<boolean> => (await direct.zcard(keys.nodes())) > 0;
  const leased = async (): Promise<boolean> =>
    (await direct.hget(keys.storePartitions(), '0')) === storeId && (await direct.exists(keys.storeLease(storeId))) === 1;
  // On its reconnect the node registers again (node-registry.ts) and writes its claim
  // and lease back (service.ts): both at that moment, neither at its next renewal.
  await waitUntil('the node registered again, or its lease back', () => answers(async () => (await registered()) || (await leased())), 10_000, 20);
  await waitUntil('both registration and lease back', async () => (await registered()) && (await leased()), 500, 20);
});
