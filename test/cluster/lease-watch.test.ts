/**
 * The start check of a store's lease (src/cluster/lease-watch.ts, DESIGN.md §9: one
 * store, one running node) against a private redis-server, for the leases it must
 * watch rather than take at once: one of another PID namespace on this host (a
 * container sharing the host name, whose pid means nothing here), one of the same host
 * name and PID namespace but another boot id (a cloned VM of the same name: the root
 * PID namespace is the same on every Linux host), and one that another node writes in
 * its place while it is watched.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import type { Redis } from 'ioredis';
import { StartupError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { Keys } from '../../src/redis/keys.js';
import { PartitionClaims, type StoreLease } from '../../src/cluster/partition-claims.js';
import { BOOT_ID, LEASE_WATCH_MS, PID_NAMESPACE, awaitLeaseFree } from '../../src/cluster/lease-watch.js';
import { openInbox } from '../harness/checks.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

const files = cleanupList();
let redis: Redis;
let claims: PartitionClaims;
const logger = createLogger('silent');

before(async () => {
  const server = await RedisServer.start();
  files.after(() => server.destroy());
  ({ redis } = await openInbox(files, server.url));
  claims = new PartitionClaims(redis, new Keys('watch:'));
});

after(() => files.run());

/** Writes `next` in place of the watched lease once the watch has read it a first time. */
function writeDuringWatch(storeId: string, next: StoreLease): NodeJS.Timeout {
  return setTimeout(() => void claims.renewLease(storeId, next, 10_000), LEASE_WATCH_MS / 2);
}

const refused = (node: string) => (err: unknown): boolean => err instanceof StartupError && err.message.includes(`already served by node ${node}`);

/** Writes `lease` as `storeId`'s, and `next` in its place during the watch: the start check must refuse, naming `next`'s node. */
async function refusedOnceWritten(storeId: string, lease: StoreLease, next: StoreLease): Promise<void> {
  await claims.renewLease(storeId, lease, 10_000);
  const written = writeDuringWatch(storeId, next);
  try {
    await assert.rejects(awaitLeaseFree(claims, storeId, `/data/${storeId}/xiu`, logger), refused(next.node));
  } finally {
    clearTimeout(written);
  }
}

test('a lease of this host name but another PID namespace, naming a pid not running here, is watched: refused once its node renews it', async () => {
  const notHere = spawnSync(process.execPath, ['-e', '']).pid;
  const lease = { url: 'http://127.0.0.1:18101', node: 'node-in-container', host: os.hostname(), pidns: 'pid:[1]', pid: notHere, renewal: 1 };
  await refusedOnceWritten('s-ns', lease, { ...lease, renewal: 2 });
  // A lease of an older release names no PID namespace: watched too.
  const { pidns: _, ...older } = lease;
  await refusedOnceWritten('s-old', { ...older, node: 'node-older' }, { ...older, node: 'node-older', renewal: 2 });
});

test('a watched lease that another node writes in its place, as its own first write, is refused: that node serves the store', async () => {
  const lapsing = { url: 'http://10.0.0.8:8080', node: 'node-crashed-far', host: 'far-away', pid: 1, renewal: 1 };
  await refusedOnceWritten('s-taken', lapsing, { url: 'http://10.0.0.9:8080', node: 'node-new-far', host: 'far-away', pid: 2, renewal: 1 });
});

test('a lease of this host name and PID namespace but another boot id, naming a pid not running here, is watched: refused once its node renews it', { skip: BOOT_ID === undefined || PID_NAMESPACE === undefined ? 'no boot id or PID namespace here (not Linux)' : false }, async () => {
  const notHere = spawnSync(process.execPath, ['-e', '']).pid;
  // A live node on a clone of this machine: same name, root PID namespace, its own boot.
  const lease = { url: 'http://10.9.9.9:8080', node: 'node-on-clone', host: os.hostname(), pidns: PID_NAMESPACE, boot: '00000000-0000-4000-8000-000000000000', pid: notHere, renewal: 1 };
  await refusedOnceWritten('s-clone', lease, { ...lease, renewal: 2 });
  // This boot's (or an older release's, naming none): a crashed run of this machine, taken at once.
  await claims.renewLease('s-crashed', { ...lease, node: 'node-crashed-here', boot: BOOT_ID }, 10_000);
  assert.equal(await awaitLeaseFree(claims, 's-crashed', '/data/crashed/xiu', logger), 'node-crashed-here');
});
