/**
 * The cached directory of partition owners (src/cluster/store-directory.ts) against a
 * private redis-server: a lease lookup in flight when its entry is forgotten (a read of
 * that node just failed) still answers its callers. lru-cache rejected them with
 * Error('deleted'), which reached producers as a 500 (a fresh operator's finding).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { PartitionClaims } from '../../src/cluster/partition-claims.js';
import { StoreDirectory } from '../../src/cluster/store-directory.js';
import { Keys } from '../../src/redis/keys.js';
import { openInbox } from '../harness/checks.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

const files = cleanupList();
const keys = new Keys('px:');
let redis: Redis;

before(async () => {
  const server = await RedisServer.start();
  files.after(() => server.destroy());
  ({ redis } = await openInbox(files, server.url));
});

after(() => files.run());

test('a lease lookup in flight when the store is forgotten answers its callers with what it read', async () => {
  const claims = new PartitionClaims(redis, keys);
  await redis.hset(keys.storePartitions(), '3', 'store-a');
  const lease = { url: 'http://127.0.0.1:1', node: 'node-a' };
  await redis.set(keys.storeLease('store-a'), PartitionClaims.leaseText(lease), 'PX', 60_000);
  const directory = new StoreDirectory(claims);
  // The claim is cached by a first lookup; the lease is then looked up again.
  await directory.owners([3]);
  for (let round = 0; round < 20; round++) {
    directory.forget('store-a');
    const pending = directory.owners([3]);
    // The lease's GET is on its way to Redis by the next turn of the event loop.
    await new Promise((resolve) => setImmediate(resolve));
    directory.forget('store-a');
    const owner = (await pending).get(3);
    assert.equal(owner?.state, 'owned', `round ${round}`);
    assert.deepEqual(owner?.state === 'owned' ? owner.lease : undefined, lease);
  }
});
