/**
 * Connections `DELETE /v1/users/{uid}/connections` closed are marked so
 * (src/cluster/presence.ts `closeConns`, `presence-close-1.lua`), and a refresh of one
 * (`presence-refresh-4.lua`) answers the DELETE's close instead of writing its entry
 * back: its node missed the kick (a half-open link reset before it delivered, the
 * network-fault tester's kick2) and would otherwise have listed it online again for
 * good. Marks are timed by Redis's clock (the `now` presence is given) and last
 * CLOSED_MARK_MS. A private redis-server; two Presence objects stand for two nodes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { CLOSED_MARK_MS, Presence } from '../../src/cluster/presence.js';
import { createRedis } from '../../src/redis/client.js';
import { Keys } from '../../src/redis/keys.js';
import { fileRedis } from '../harness/file-redis.js';

const keys = new Keys('marks:');
let redis: Redis;

fileRedis(async ({ redis: server, cleanup }) => {
  redis = await createRedis({ url: server.url, commandTimeoutMs: 2000 });
  cleanup.after(() => redis.disconnect());
});

/** Presence of node `node`; every node counts as registered. */
function node(name: string): Presence {
  return new Presence(redis, keys, { node: name, ttlMs: 60_000, maxPerUser: 5, liveNodes: async (nodes) => new Set(nodes) });
}

test('a connection a DELETE closed is not written back by its refresh: the refresh answers the close; another connection is', async () => {
  const [here, there] = [node('n-here'), node('n-there')];
  await here.add('marked', 'c-closed', 'phone', 1);
  await here.add('marked', 'c-other', 'laptop', 2);
  // The user's entries are gone (the DELETE, or Redis lost them); only c-closed was asked to close.
  await redis.del(keys.conns('marked'));
  await there.closeConns('marked', ['c-closed'], 1008, 'disconnected by the service');

  assert.deepEqual(await here.refresh('marked', 'c-closed', 'phone', 1), { code: 1008, reason: 'disconnected by the service' });
  assert.equal(await here.refresh('marked', 'c-other', 'laptop', 2), 'readded');
  assert.deepEqual((await there.list('marked')).map((e) => e.conn), ['c-other']);
  // Asked again (the next heartbeat, should the close not have happened): the same answer.
  assert.deepEqual(await here.refresh('marked', 'c-closed', 'phone', 1), { code: 1008, reason: 'disconnected by the service' });
});

test('closeConns removes the entries and marks them; an entry written back after it by another path goes at its next refresh', async () => {
  const [here, there] = [node('n-here'), node('n-there')];
  await here.add('rewritten', 'c1', 'phone', 1);
  const value = (await redis.hget(keys.conns('rewritten'), 'c1')) ?? '';
  await there.closeConns('rewritten', ['c1'], 1008, 'a | reason with bars');
  assert.equal(await redis.hexists(keys.conns('rewritten'), 'c1'), 0, 'the entry is gone at once');
  const ttl = await redis.pttl(keys.closed('rewritten'));
  assert.ok(ttl > CLOSED_MARK_MS - 60_000 && ttl <= CLOSED_MARK_MS, `the marks live ${ttl} ms`);

  // Written back as presence-withdraw-1 writes back a replaced entry, or an older copy of the data holds it.
  await redis.hset(keys.conns('rewritten'), 'c1', value);
  assert.deepEqual(await here.refresh('rewritten', 'c1', 'phone', 1), { code: 1008, reason: 'a | reason with bars' });
  assert.equal(await redis.hexists(keys.conns('rewritten'), 'c1'), 0);
});

test('a mark past its time is ignored by a refresh and deleted by the next DELETE of the user', async () => {
  const [here, there] = [node('n-here'), node('n-there')];
  await here.add('stale-mark', 'c-old', 'phone', 1);
  await redis.del(keys.conns('stale-mark'));
  await redis.hset(keys.closed('stale-mark'), 'c-old', `${Date.now() - 1}|1008|long ago`);
  assert.equal(await here.refresh('stale-mark', 'c-old', 'phone', 1), 'readded');

  await there.closeConns('stale-mark', ['c-new'], 1008, 'now');
  assert.deepEqual(Object.keys(await redis.hgetall(keys.closed('stale-mark'))), ['c-new']);
});

test('over maxmemory the entries are removed unmarked: Redis refuses the marks, not the DELETE', async (t) => {
  const [here, there] = [node('n-here'), node('n-there')];
  await here.add('full', 'c1', 'phone', 1);
  t.after(() => redis.config('SET', 'maxmemory', '0'));
  await redis.config('SET', 'maxmemory', '1');
  await there.closeConns('full', ['c1'], 1008, 'disconnected by the service');
  await redis.config('SET', 'maxmemory', '0');
  assert.equal(await redis.hexists(keys.conns('full'), 'c1'), 0, 'the entry is gone');
  assert.equal(await redis.exists(keys.closed('full')), 0, 'no mark was written');
});
