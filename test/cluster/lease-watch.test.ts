/**
 * The start check of a store's lease (src/cluster/lease-watch.ts, DESIGN.md §9: one
 * store, one running node) against a private redis-server, for the leases it must
 * watch rather than take at once: one of another PID namespace on this host (a
 * container sharing the host name, whose pid means nothing here), and one that
 * another node writes in its place while it is watched.
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
import { LEASE_WATCH_MS, awaitLeaseFree } from '../../src/cluster/lease-watch.js';
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

test('a lease of this host name but another PID namespace, naming a pid not running here, is watched: refused once its node renews it', async () => {
  const notHere = spawnSync(process.execPath, ['-e', '']).pid;
  const lease = { url: 'http://127.0.0.1:18101', node: 'node-in-container', host: os.hostname(), pidns: 'pid:[1]', pid: notHere, renewal: 1 };
  await claims.renewLease('s-ns', lease, 10_000);
  const renewed = writeDuringWatch('s-ns', { ...lease, renewal: 2 });
  try {
    await assert.rejects(awaitLeaseFree(claims, 's-ns', '/data/ns/xiu', logger), refused('node-in-container'));
  } finally {
    clearTimeout(renewed);
  }
  // A lease of an older release names no PID namespace: watched too.
  const { pidns: _, ...older } = lease;
  await claims.renewLease('s-old', { ...older, node: 'node-older' }, 10_000);
  const renewedOlder = writeDuringWatch('s-old', { ...older, node: 'node-older', renewal: 2 });
  try {
    await assert.rejects(awaitLeaseFree(claims, 's-old', '/data/old/xiu', logger), refused('node-older'));
  } finally {
    clearTimeout(renewedOlder);
  }
});

test('a watched lease that another node writes in its place, as its own first write, is refused: that node serves the store', async () => {
  const lapsing = { url: 'http://10.0.0.8:8080', node: 'node-crashed-far', host: 'far-away', pid: 1, renewal: 1 };
  await claims.renewLease('s-taken', lapsing, 10_000);
  const taker = writeDuringWatch('s-taken', { url: 'http://10.0.0.9:8080', node: 'node-new-far', host: 'far-away', pid: 2, renewal: 1 });
  try {
    await assert.rejects(awaitLeaseFree(claims, 's-taken', '/data/taken/xiu', logger), refused('node-new-far'));
  } finally {
    clearTimeout(taker);
  }
});
