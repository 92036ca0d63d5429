/**
 * A store's lease and claims over a node's life (src/cluster/store-ownership.ts,
 * DESIGN.md §9) against a private redis-server: the lease is dropped at stop, also
 * with a renewal in flight (readers learn at once that the store cannot be read, and
 * a restart elsewhere need not wait it out); it is still renewed while another store
 * holds the block (a copy of the data dir must not find it lapsed); and the claims'
 * age mark that a starting node waits on is written by every re-assertion, so a node
 * starting long after Redis lost its data does not wait at all. A data dir whose
 * partitions an operator retired (README "Several nodes") is told so in words of its
 * own, at a start and on a node still running on it (partition-claims.ts
 * `claimRefusal`; walk23 L3: it read "partition 16 is held by store retired" and
 * advised retiring that store's partitions, retired already).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { StartupError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { Keys } from '../../src/redis/keys.js';
import { PartitionClaims } from '../../src/cluster/partition-claims.js';
import { RETIRED_STORE } from '../../src/cluster/store-directory.js';
import { LEASE_TTL_MS, StoreOwnership } from '../../src/cluster/store-ownership.js';
import { BOOT_ID, PID_NAMESPACE } from '../../src/cluster/lease-watch.js';
import { flushPrefix, openInbox, waitUntil } from '../harness/checks.js';
import { cleanupList, type CleanupContext } from '../harness/pixiu-server.js';
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
async function fresh(t: CleanupContext): Promise<{ claims: PartitionClaims; keys: Keys; dir: string }> {
  const keys = new Keys(`own${nextPrefix++}:`);
  const root = await mkdtemp(path.join(os.tmpdir(), 'pixiu-own-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  return { claims: new PartitionClaims(redis, keys), keys, dir: path.join(root, 'xiu') };
}

test('the lease is written for a full lease period, and stop drops it, also when a renewal is in flight', async (t) => {
  const { claims, dir } = await fresh(t);
  const ownership = await StoreOwnership.claim({ claims, dir, partitions: 4, logger });
  // Stopped below, as what is tested; here too, for a test that fails before (stop is idempotent).
  t.after(() => ownership.stop());
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

/** What an operator does to retire a block (README "Several nodes"): HSET each partition to `retired`. */
async function retire(keys: Keys, base: number, count: number): Promise<void> {
  await redis.hset(keys.storePartitions(), ...Array.from({ length: count }, (_, i) => [String(base + i), RETIRED_STORE]).flat());
}

/** The retired wording, and none of the words for a block another store holds. */
function assertRetiredWords(message: string, dir: string, span: string): void {
  assert.ok(message.includes(`the store in ${dir} cannot claim partitions ${span}: partition `), message);
  assert.match(message, /of them was retired by an operator \(set to "retired" in the partition claims: README, "Several nodes"\)/);
  assert.match(message, /every message stored in it reads as missing on every node/);
  assert.match(message, /This data dir must not serve again: stop any node running on it and start the node on a new data dir/);
  assert.doesNotMatch(message, /held by store|retire its partitions/);
}

test('a data dir whose partitions were retired is refused at start: they were retired, it must not serve again, start on a new data dir', async (t) => {
  const { claims, keys, dir } = await fresh(t);
  const first = await StoreOwnership.claim({ claims, dir, partitions: 4, logger });
  await retire(keys, first.partitionBase, 4);
  await assert.rejects(StoreOwnership.claim({ claims, dir, partitions: 4, logger }), (err: unknown) => {
    assert.ok(err instanceof StartupError, String(err));
    assertRetiredWords(err.message, dir, `${first.partitionBase}..${first.partitionBase + 3}`);
    return true;
  });
});

test('a node still running when its partitions are retired suspends its writes, saying they were retired', async (t) => {
  const { claims, keys, dir } = await fresh(t);
  const ownership = await StoreOwnership.claim({ claims, dir, partitions: 4, logger });
  const reasons: (string | undefined)[] = [];
  await ownership.advertise({ url: 'http://127.0.0.1:18203', node: 'node-r' }, (reason) => reasons.push(reason));
  t.after(() => ownership.stop());
  await retire(keys, ownership.partitionBase, 4);
  ownership.renewNow();
  await waitUntil('writes suspended', async () => reasons.length >= 2, 5000, 10);
  assert.ok(reasons[1]?.startsWith('message store writes are suspended: '), reasons[1]);
  assertRetiredWords(reasons[1] ?? '', dir, `${ownership.partitionBase}..${ownership.partitionBase + 3}`);
});

test('the lease a start judged left behind is taken over once: written again later by its node (alive after all), it is a live node\'s and writes are suspended', async (t) => {
  const { claims, dir } = await fresh(t);
  const storeId = (await StoreOwnership.claim({ claims, dir, partitions: 4, logger })).storeId;
  // A lease of this machine naming a pid that is gone: the start takes it at once (lease-watch.ts).
  const gone = spawnSync(process.execPath, ['-e', '']).pid;
  const stale = {
    url: 'http://127.0.0.1:18204', node: 'node-gone', host: os.hostname(), pid: gone,
    ...(PID_NAMESPACE === undefined ? {} : { pidns: PID_NAMESPACE }), ...(BOOT_ID === undefined ? {} : { boot: BOOT_ID }),
  };
  await claims.renewLease(storeId, stale, LEASE_TTL_MS);
  const ownership = await StoreOwnership.claim({ claims, dir, partitions: 4, logger });
  assert.equal(ownership.leftBehind, 'node-gone');
  const states: (string | undefined)[] = [];
  await ownership.advertise({ url: 'http://127.0.0.1:18205', node: 'node-c' }, (reason) => states.push(reason));
  t.after(() => ownership.stop());
  assert.deepEqual(states, [undefined], 'its first write replaces the lease left behind: writes taken');
  // That node writes its lease again: it serves the store, whatever the start judged.
  await claims.renewLease(storeId, { ...stale, renewal: 7 }, LEASE_TTL_MS);
  // renewNow() does nothing while a renewal runs: called at each poll, so a dropped call is made again.
  await waitUntil('writes suspended', async () => { ownership.renewNow(); return states.length >= 2; }, 5000, 10);
  assert.match(states[1] ?? '', /^message store writes are suspended: .*already served by node node-gone at http:\/\/127\.0\.0\.1:18204/);
});

test('a renewal finding another node\'s lease of a lower renewal count is a conflict, not Redis losing this node\'s writes; its own lease gone back is', async (t) => {
  const { claims, dir } = await fresh(t);
  const ownership = await StoreOwnership.claim({ claims, dir, partitions: 4, logger });
  const states: (string | undefined)[] = [];
  const lost: string[] = [];
  const url = 'http://127.0.0.1:18206';
  await ownership.advertise({ url, node: 'node-d' }, (reason) => states.push(reason), undefined, (reason) => lost.push(reason));
  t.after(() => ownership.stop());
  const renewal = async (): Promise<number> => (await claims.leaseOf(ownership.storeId))?.renewal ?? 0;
  // renewNow() does nothing while a renewal runs (the one before may still be finishing
  // after its lease write): called at each poll, so a dropped call is made again.
  for (let n = 2; n <= 3; n++) {
    await waitUntil(`renewal ${n} written`, async () => { ownership.renewNow(); return await renewal() >= n; }, 5000, 10);
  }
  // A copy of the data dir started elsewhere writes its first leases: a conflict (writes
  // suspended), while Redis lost nothing of this node's: the inbox generation must not
  // be raised for it (every device would be reset).
  await claims.renewLease(ownership.storeId, { url: 'http://127.0.0.1:18207', node: 'node-copy', renewal: 1 }, LEASE_TTL_MS);
  await waitUntil('writes suspended', async () => { ownership.renewNow(); return states.length >= 2; }, 5000, 10);
  assert.match(states[1] ?? '', /already served by node node-copy/);
  assert.deepEqual(lost, []);
  // This node's own lease back at an older renewal than Redis acknowledged: Redis lost writes.
  await waitUntil('its own lease written back', async () => (await claims.leaseOf(ownership.storeId))?.node === 'node-d', 5000, 10);
  await claims.renewLease(ownership.storeId, { url, node: 'node-d', renewal: 1 }, LEASE_TTL_MS);
  await waitUntil('the lost writes told', async () => { ownership.renewNow(); return lost.length > 0; }, 5000, 10);
  assert.match(lost[0] ?? '', /^this node's store lease was back at renewal 1, after Redis had acknowledged renewal \d+/);
});
