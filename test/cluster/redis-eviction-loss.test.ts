/**
 * Keys evicted under a running node (src/cluster/redis-loss-lines.ts,
 * src/redis/persistence-check.ts `evictionSign`), against a private redis-server set
 * to `maxmemory-policy allkeys-lru` at runtime and filled past `maxmemory`: Redis
 * evicts every key, the store's claim among them, and the node's renewal that finds it
 * gone logs at error that Redis evicted keys, with its policy and `evicted_keys` —
 * not "a FLUSHALL, a Redis that came back empty, or a snapshot older than this store" (a black-box SRE's finding).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LEASE_RENEW_MS } from '../../src/cluster/lease-watch.js';
import { openInbox, waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { startInProcessAlone } from '../harness/pixiu-server.js';

test('a store claim lost to eviction is logged naming eviction, the policy and the keys evicted, not a FLUSHALL or a restart', async (t) => {
  const { logger, lines } = capturingLogger();
  const { redis: server, server: { client } } = await startInProcessAlone(t, { redisPrefix: 'evict-loss:' }, logger);
  const { redis: admin } = await openInbox(t, server.url);
  assert.equal((await client.post('/v1/messages', { to: 'evicted-u', type: 't', data: 1 })).status, 201);

  await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
  try {
    // One write over maxmemory 1: Redis evicts every key it has, then refuses it.
    await admin.config('SET', 'maxmemory', '1');
    await assert.rejects(admin.set('filler', 'x'), /^ReplyError: OOM|OOM command not allowed/);
    await admin.config('SET', 'maxmemory', '0');
    assert.match(await admin.info('stats'), /^evicted_keys:[1-9]/m);
    const lost = (): typeof lines => lines.filter((l) => l.level === 50 && /while this node ran/.test(l.msg ?? ''));
    await waitUntil('the loss logged', () => Promise.resolve(lost().length > 0), 2 * LEASE_RENEW_MS + 2000, 50);
    const [line] = lost();
    assert.match(line?.msg ?? '', /^Redis evicted keys while this node ran \(this store's claim was gone/, JSON.stringify(line));
    assert.match(line?.msg ?? '', /run Redis with maxmemory-policy noeviction/);
    assert.doesNotMatch(line?.msg ?? '', /FLUSHALL/);
    assert.equal(line?.maxmemoryPolicy, 'allkeys-lru');
    assert.ok(Number(line?.evictedKeys) > 0, JSON.stringify(line));
  } finally {
    await admin.config('SET', 'maxmemory', '0');
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
  }
});
