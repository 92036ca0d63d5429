/**
 * A store's lease and claims over a node's life (src/cluster/store-ownership.ts,
 * DESIGN.md §9) against a private redis-server: the lease is dropped at stop, also
 * with a renewal in flight (readers learn at once that the store cannot be read, and
 * a restart elsewhere need not wait it out); it is still renewed while another store
 * holds the block (a copy of the data dir must not find it lapsed); and the claims'
 * age mark that a starting node waits on is written by every re-assertion, so a node
 * starting long after Redis lost its data does not wait at all.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { createLogger } from '../../src/logger.js';
import { Keys } from '../../src/redis/keys.js';
import { PartitionClaims } from '../../src/cluster/partition-claims.js';
import { LEASE_TTL_MS, StoreOwnership } from '../../src/cluster/store-ownership.js';
import { BOOT_ID } from '../../src/cluster/lease-watch.js';
import { flushPrefix, openInbox, waitUntil } from '../harness/checks.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

const files = cleanupList();
let redis: Redis;
let nextPrefix = 0;
const logger = createLogger('silent');

before(async () => {
  const server = await RedisServer.start();
  files.after(() => server.destroy());
  ({ redis } = await openInbox(files, server.url));
});

after(() => files.run());

/** Claims on a key prefix of their own, and a new store folder removed when the test ends. */
async function fresh(t: { after(fn: () => unknown): void }): Promise<{ claims: PartitionClaims; keys: Keys; dir: string }> {
  const keys = new Keys(`own${nextPrefix++}:`);
  const root = await mkdtemp(path.join(os.tmpdir(), 'pixiu-own-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  return { claims: new PartitionClaims(redis, keys), keys, dir: path.join(root, 'xiu') };
}

test('the lease is written for a full lease period, and stop drops it, also when a renewal is in flight', async (t) => {
  const { claims, dir } = await fresh(t);
  const ownership = await StoreOwnership.claim({ claims, dir, partitions: 4, logger });
  await ownership.advertise({ url: 'http://127.0.0.1:18201', node: 'node-a' }, () => undefined);
  const held = await claims.leaseState(ownership.storeId);
  assert.equal(held?.lease.node, 'node-a');
  // Where this machine has a boot id, the lease names it (lease-watch.ts: a clone of the same host name is another machine).
  assert.equal(held?.lease.boot, BOOT_ID);
  // Written for three renewal periods: one renewal a little late does not let it lapse.
  assert.ok(held !== undefined && held.ttlMs > LEASE_TTL_MS - 2000, `for a full lease period: ${held?.ttlMs} ms`);
  // A renewal started just before the stop (the timer, or Redis back) must not write the lease back after it.
  ownership.renewNow();
  await ownership.stop();
  assert.equal(await claims.leaseOf(ownership.storeId), undefined, 'no lease left after stop');
  // A renewal still running would write its lease a few round trips later: none comes.
  await delay(200);
  assert.equal(await claims.leaseOf(ownership.storeId), undefined, 'none written back after stop');
});

test('while another store holds its block, the node still renews its lease: a copy of its data dir finds it served', async (t) => {
  const { claims, keys, dir } = await fresh(t);
  const ownership = await StoreOwnership.claim({ claims, dir, partitions: 4, logger });
  const states: (string | undefined)[] = [];
  await ownership.advertise({ url: 'http://127.0.0.1:18202', node: 'node-b' }, (reason) => states.push(reason));
  t.after(() => ownership.stop());
  // Redis lost the claims and a new data dir took the block before this node re-asserted it.
  await flushPrefix(redis, keys.prefix);
  await claims.claim('rival', 4, ownership.partitionBase, { dir: '/data/rival/xiu', host: 'host-r' });
  ownership.renewNow();
  await waitUntil('writes suspended', async () => states.length >= 2, 5000, 10);
  assert.match(states[1] ?? '', /^message store writes are suspended: .*partition \d+ is held by store rival/);
  const state = await claims.leaseState(ownership.storeId);
  assert.equal(state?.lease.node, 'node-b', 'the lease is written back');
  assert.ok(state !== undefined && state.ttlMs > LEASE_TTL_MS - 2000, `for a full lease period: ${state?.ttlMs} ms`);
});

test('a re-assertion marks when the claims were written back; a node starting once they are older than the settle time does not wait', async (t) => {
  const { claims, keys, dir } = await fresh(t);
  const running = await StoreOwnership.claim({ claims, dir, partitions: 4, logger });
  // FLUSHALL of this prefix: the claims and their age mark are gone; the running node's
  // next re-assertion writes both back.
  await flushPrefix(redis, keys.prefix);
  await claims.claim(running.storeId, 4, running.partitionBase, { dir, host: os.hostname() });
  assert.notEqual(await redis.get(keys.claimsSince()), null, 'the re-assertion marked the claims\' age');
  // That was long ago (by Redis's clock): every running node has re-asserted its claim since.
  const [sec] = await redis.time();
  await redis.set(keys.claimsSince(), String((Number(sec) - 60) * 1000));
  const other = await fresh(t);
  const started = performance.now();
  const next = await StoreOwnership.claim({ claims, dir: other.dir, partitions: 4, logger, settleMs: 5000, runningNodes: async () => 1 });
  assert.ok(performance.now() - started < 2000, `no wait: ${Math.round(performance.now() - started)} ms`);
  assert.notEqual(next.partitionBase, running.partitionBase);
});
