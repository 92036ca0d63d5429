/**
 * The cached directory of partition owners (src/cluster/store-directory.ts) against a
 * private redis-server: a lease lookup in flight when its entry is forgotten (a read of
 * that node just failed) still answers its callers. lru-cache rejected them with
 * Error('deleted'), which reached producers as a 500 (a fresh operator's finding).
 * And what the caches keep: a forgotten store's lease is read again at once, and a
 * partition found unclaimed is cached for ABSENT_CACHE_MS, not the claim cache's TTL.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { PartitionClaims } from '../../src/cluster/partition-claims.js';
import { ABSENT_CACHE_MS, CLAIM_CACHE_MS, LEASE_CACHE_MS, RETIRED_STORE, StoreDirectory } from '../../src/cluster/store-directory.js';
import { Keys } from '../../src/redis/keys.js';
import { openInbox, waitUntil } from '../harness/checks.js';
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

test('a forgotten store\'s lease is read again at once: a node restarted at another address is reached on the next read', async () => {
  const claims = new PartitionClaims(redis, keys);
  await redis.hset(keys.storePartitions(), '5', 'store-b');
  const before = { url: 'http://127.0.0.1:2', node: 'node-b1' };
  await redis.set(keys.storeLease('store-b'), PartitionClaims.leaseText(before), 'PX', 60_000);
  const directory = new StoreDirectory(claims);
  const first = (await directory.owners([5])).get(5);
  assert.deepEqual(first?.state === 'owned' ? first.lease : undefined, before);
  // The store's node restarted elsewhere; a read of the old address failed, so the
  // router forgets the store: the next lookup reads the new lease, not the cached one.
  const moved = { url: 'http://127.0.0.1:3', node: 'node-b2' };
  await redis.set(keys.storeLease('store-b'), PartitionClaims.leaseText(moved), 'PX', 60_000);
  directory.forget('store-b');
  const again = (await directory.owners([5])).get(5);
  assert.deepEqual(again?.state === 'owned' ? again.lease : undefined, moved);
});

test('an unclaimed partition is cached only briefly: a store claiming it is seen within about a second, not the claim cache\'s 5 s', async () => {
  const claims = new PartitionClaims(redis, keys);
  const directory = new StoreDirectory(claims);
  assert.deepEqual((await directory.owners([7])).get(7), { state: 'unclaimed' });
  const claimedAt = performance.now();
  await redis.hset(keys.storePartitions(), '7', 'store-c');
  await waitUntil('partition 7 seen as owned', async () => (await directory.owners([7])).get(7)?.state === 'owned', CLAIM_CACHE_MS * 2, 50);
  const seenAfter = performance.now() - claimedAt;
  assert.ok(seenAfter < (ABSENT_CACHE_MS + CLAIM_CACHE_MS) / 2 + 500, `seen after ${Math.round(seenAfter)} ms`);
});

test('a partition an operator retired (claimed as "retired") is retired: its records read as missing, no lease is looked for', async () => {
  const claims = new PartitionClaims(redis, keys);
  await redis.hset(keys.storePartitions(), '9', RETIRED_STORE);
  const directory = new StoreDirectory(claims);
  assert.deepEqual((await directory.owners([9])).get(9), { state: 'retired' });
});

test('a store found without a lease is cached only briefly: its node started again is read within about a second, not the lease cache\'s 2 s', async () => {
  const claims = new PartitionClaims(redis, keys);
  await redis.hset(keys.storePartitions(), '11', 'store-d');
  const directory = new StoreDirectory(claims);
  assert.deepEqual((await directory.owners([11])).get(11), { state: 'owned', storeId: 'store-d', lease: undefined });
  const lease = { url: 'http://127.0.0.1:4', node: 'node-d' };
  const leasedAt = performance.now();
  await redis.set(keys.storeLease('store-d'), PartitionClaims.leaseText(lease), 'PX', 60_000);
  const leaseOf = async (): Promise<unknown> => {
    const owner = (await directory.owners([11])).get(11);
    return owner?.state === 'owned' ? owner.lease : undefined;
  };
  await waitUntil('the lease of store-d seen', async () => (await leaseOf()) !== undefined, LEASE_CACHE_MS * 2, 50);
  const seenAfter = performance.now() - leasedAt;
  assert.ok(seenAfter < (ABSENT_CACHE_MS + LEASE_CACHE_MS) / 2, `seen after ${Math.round(seenAfter)} ms`);
  assert.deepEqual(await leaseOf(), lease);
});
