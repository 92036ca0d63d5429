/**
 * `pixiu inspect cluster` (and every command that checks the key prefix) against a
 * replica not synced yet: it reads empty, and the answer says it is a replica whose link
 * to its primary is down, not that the key prefix is wrong (an SRE pointed it at a
 * replica in its first sync and was told `no Pixiu service has used the key prefix`).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { replicaNotSynced } from '../../src/cli/inspect-redis.js';
import { freePort, RedisServer } from '../harness/redis-server.js';
import { runCli, tempDataDir } from '../harness/pixiu-server.js';

test('inspect cluster on a replica whose primary it has not synced from names that, not the key prefix', { timeout: 30_000 }, async (t) => {
  // Its primary's port: nothing listens there, so the replica never syncs.
  const primaryPort = await freePort();
  const replica = await RedisServer.start({ args: ['--replicaof', '127.0.0.1', String(primaryPort)] });
  t.after(() => replica.destroy());
  const run = await runCli(['inspect', 'cluster'], { PIXIU_REDIS_URL: replica.url, PIXIU_DATA_DIR: await tempDataDir(t) });
  assert.equal(run.code, 1, run.stdout);
  assert.equal(run.stdout, '');
  assert.match(run.stderr, new RegExp(`^pixiu: this Redis is a replica whose link to its primary 127\\.0\\.0\\.1:${primaryPort} is down `
    + '\\(master_link_status:down: not synced yet, or cut off\\): it may hold none of the primary\'s keys; read the primary \\(--redis-url\\)'));
  assert.doesNotMatch(run.stderr, /key prefix/);
});

test('INFO replication read: a replica syncing, one cut off, one linked and a primary', () => {
  const info = (fields: string) => `# Replication\r\n${fields.split(' ').join('\r\n')}\r\n`;
  assert.match(replicaNotSynced(info('role:slave master_host:10.0.0.5 master_port:6379 master_link_status:down master_sync_in_progress:1')) ?? '',
    /^this Redis is a replica still syncing from its primary 10\.0\.0\.5:6379 \(master_sync_in_progress:1\)/);
  assert.match(replicaNotSynced(info('role:slave master_host:h master_port:7000 master_link_status:down master_sync_in_progress:0')) ?? '',
    /^this Redis is a replica whose link to its primary h:7000 is down/);
  assert.equal(replicaNotSynced(info('role:slave master_host:h master_port:7000 master_link_status:up master_sync_in_progress:0')), undefined);
  assert.equal(replicaNotSynced(info('role:master connected_slaves:0')), undefined);
  assert.equal(replicaNotSynced(''), undefined, 'INFO not answered');
});
