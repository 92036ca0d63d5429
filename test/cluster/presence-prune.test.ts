/**
 * Pruning presence (src/cluster/presence.ts, `presence-prune-1.lua`): entries judged
 * dead when read (expired, or of a node that is gone) are deleted only while they are
 * still what was read. An entry refreshed in between — its node registered again and
 * its connection's heartbeat wrote it — is kept; deleted, that user's notifies stopped
 * reaching the node until the next refresh. And which nodes are judged gone
 * (src/cluster/node-registry.ts): registrations are scored, and judged lapsed, by
 * Redis's clock (TIME), one clock for every node. Scored by each node's own, with each
 * renewal removing the members scored below the renewing node's "now", nodes whose
 * clocks differed by more than the TTL less one renewal (10 s) unregistered each
 * other, and every node then pruned the others' presence. Presence entries expire by
 * that clock too (NodeRegistry.now): by each node's own, a node 26 s ahead deleted a
 * live node's entry written a moment before; and the append script judges them live
 * by that clock too (Inbox's `now`): by the appending node's own, a fleet 60 s ahead of
 * Redis found every fresh entry expired and notified no node. A refresh writing back a
 * lost entry (presence-refresh-4) judges it against live entries only: expired ones of
 * a crashed node neither replace it (4002) nor fill the limit. A private redis-server.
 */
import { after, before, mock, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { NodeRegistry } from '../../src/cluster/node-registry.js';
import { Presence, type PresenceOptions } from '../../src/cluster/presence.js';
import { Inbox } from '../../src/inbox/inbox.js';
import { MsgKind } from '../../src/ids/msg-id.js';
import { createLogger } from '../../src/logger.js';
import { createRedis } from '../../src/redis/client.js';
import { Keys } from '../../src/redis/keys.js';
import { RedisServer } from '../harness/redis-server.js';

const keys = new Keys('px:');
let server: RedisServer;
let redis: Redis;

before(async () => {
  server = await RedisServer.start();
  redis = await createRedis({ url: server.url, commandTimeoutMs: 2000 });
});

after(async () => {
  redis?.disconnect();
  await server?.destroy();
});

const entry = (expiresAt: number, node: string, device: string): string => `${expiresAt}|${node}|${device}|1`;

test('an entry judged dead is deleted; one refreshed between the read and the delete is kept', async () => {
  const user = 'prune-race';
  const conns = keys.conns(user);
  const now = Date.now();
  await redis.hset(conns, 'c-gone', entry(now + 60_000, 'n-gone', 'phone'), 'c-back', entry(now + 60_000, 'n-back', 'laptop'));
  const presence = new Presence(redis, keys, {
    node: 'n-here', ttlMs: 60_000, maxPerUser: 5,
    // Both nodes look gone when asked; meanwhile n-back registers again and its
    // connection's heartbeat refreshes its entry.
    liveNodes: async () => {
      await redis.hset(conns, 'c-back', entry(Date.now() + 120_000, 'n-back', 'laptop'));
      return new Set<string>();
    },
  });
  assert.deepEqual(await presence.list(user), []);
  assert.deepEqual(Object.keys(await redis.hgetall(conns)), ['c-back'], 'the refreshed entry is kept, the dead one gone');
});

test('a node whose clock is 16 s ahead does not unregister the other nodes', async () => {
  const logger = createLogger('silent');
  const opts = { intervalMs: 5000, ttlMs: 15_000, logger };
  const b = new NodeRegistry(redis, keys, { ...opts, node: 'node-b' });
  const c = new NodeRegistry(redis, keys, { ...opts, node: 'node-c' });
  await b.start();
  await c.start();
  const a = new NodeRegistry(redis, keys, { ...opts, node: 'node-a' });
  const realNow = Date.now.bind(Date);
  const skewed = mock.method(Date, 'now', () => realNow() + 16_000);
  try {
    await a.start(); // A's machine: its clock is 16 s ahead
  } finally {
    skewed.mock.restore();
  }
  try {
    // B renewed a moment ago and is alive; C's clock is right.
    assert.equal(await c.isRegistered('node-b'), true, 'C takes B, which just renewed, for gone: A\'s renewal deleted B\'s registration');
    assert.deepEqual([...await c.liveAmong(['node-a', 'node-b'])].sort(), ['node-a', 'node-b']);
  } finally {
    await Promise.all([a.stop(), b.stop(), c.stop()]);
  }
});

test('a registration past its expiry, not yet removed by any renewal, is not a live node: its presence entries are not listed', async () => {
  const logger = createLogger('silent');
  const here = new NodeRegistry(redis, keys, { node: 'node-here', intervalMs: 5000, ttlMs: 15_000, logger });
  await here.start();
  try {
    // Node "node-lapsed" was killed: its registration's score (its expiry, Redis's
    // clock) has passed, and no renewal has run since to remove it.
    const [seconds, micros] = await redis.time();
    const redisNow = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    await redis.zadd(keys.nodes(), String(redisNow - 1000), 'node-lapsed');
    assert.deepEqual([...await here.liveAmong(['node-lapsed'])], [], 'a lapsed registration is taken for a live node');
    assert.deepEqual(await here.othersNow(), []);
    const presence = new Presence(redis, keys, {
      node: 'node-here', ttlMs: 25_000, maxPerUser: 5, liveNodes: (nodes) => here.liveAmong(nodes), now: () => here.now(),
    });
    await redis.hset(keys.conns('erin'), 'c-lapsed', entry(here.now() + 20_000, 'node-lapsed', 'phone'));
    assert.deepEqual(await presence.list('erin'), [], 'the connection of the lapsed node is listed as online');
  } finally {
    await redis.zrem(keys.nodes(), 'node-lapsed');
    await here.stop();
  }
});

test('a refresh writing back a lost entry does not judge it against expired entries: neither an expired one of its device nor expired ones up to the limit', async () => {
  const user = 'rewrite-past-expired';
  const conns = keys.conns(user);
  // A node that crashed left its entries, expired since (no add or list of the user
  // pruned them); then Redis lost the live connection's entry (a failover to a replica
  // that was behind). The device had moved to this node: no newer connection exists.
  const past = Date.now() - 1000;
  await redis.hset(conns, 'c-dead-phone', entry(past, 'n-dead', 'phone'), 'c-dead-tablet', entry(past, 'n-dead', 'tablet'),
    'c-dead-web', entry(past, 'n-dead', 'web'));
  const presence = new Presence(redis, keys, { node: 'n-here', ttlMs: 60_000, maxPerUser: 2, liveNodes: async (nodes) => new Set(nodes) });
  assert.equal(await presence.refresh(user, 'c-live', 'phone', 1), 'readded', 'closed as replaced (4002) or over the limit by entries that have expired');
  assert.deepEqual(Object.keys(await redis.hgetall(conns)), ['c-live'], 'the expired entries are dropped');
  // Lost again, beside expired entries of other devices only, as many as the limit.
  await redis.hdel(conns, 'c-live');
  await redis.hset(conns, 'c-dead-tablet', entry(past, 'n-dead', 'tablet'), 'c-dead-web', entry(past, 'n-dead', 'web'));
  assert.equal(await presence.refresh(user, 'c-live', 'phone', 1), 'readded', 'over the limit by entries that have expired');
});

/** A node's registry and presence, as gateway.ts builds them (heartbeat 10 s). */
function node(id: string): { registry: NodeRegistry; presence: Presence } {
  const registry = new NodeRegistry(redis, keys, { node: id, intervalMs: 5000, ttlMs: 15_000, logger: createLogger('silent') });
  const opts: PresenceOptions = {
    node: id, ttlMs: 10_000 * 2 + 5000, maxPerUser: 5, liveNodes: (nodes) => registry.liveAmong(nodes),
    now: () => registry.now(),
  };
  return { registry, presence: new Presence(redis, keys, opts) };
}

test('a node whose clock is 26 s ahead does not prune a live node\'s fresh presence entry', async () => {
  const b = node('node-b');
  await b.registry.start();
  const realNow = Date.now.bind(Date);
  const skewed = mock.method(Date, 'now', () => realNow() + 26_000);
  const a = node('node-a');
  try {
    await a.registry.start();
    skewed.mock.restore();
    assert.equal((await b.presence.add('carol', 'conn-b1', 'phone', Date.now())).admitted, true);
    const again = mock.method(Date, 'now', () => realNow() + 26_000);
    let seen;
    try {
      seen = await a.presence.list('carol'); // node A's clock
    } finally {
      again.mock.restore();
    }
    assert.deepEqual(seen.map((e) => e.conn), ['conn-b1'], 'node A sees carol\'s connection on node B');
    assert.deepEqual(Object.keys(await redis.hgetall(keys.conns('carol'))), ['conn-b1'], 'the entry B wrote a moment ago is still there');
  } finally {
    skewed.mock.restore();
    await Promise.all([a.registry.stop(), b.registry.stop()]);
  }
});

test('with every node 60 s ahead of Redis, an append names the node holding the user\'s fresh connection', async () => {
  const realNow = Date.now.bind(Date);
  const skewed = mock.method(Date, 'now', () => realNow() + 60_000);
  // Node B, as gateway.ts builds it (heartbeat 25 s: entries live 55 s).
  const registry = new NodeRegistry(redis, keys, { node: 'node-b', intervalMs: 5000, ttlMs: 15_000, logger: createLogger('silent') });
  try {
    await registry.start();
    const presence = new Presence(redis, keys, {
      node: 'node-b', ttlMs: 25_000 * 2 + 5000, maxPerUser: 5,
      liveNodes: (nodes) => registry.liveAmong(nodes), now: () => registry.now(),
    });
    assert.equal((await presence.add('dave', 'conn-b1', 'phone', Date.now())).admitted, true);
    // Node A (same clock) appends a message for dave a moment later.
    const inbox = new Inbox(redis, { prefix: 'px:', cap: 100, now: () => registry.now() });
    const res = await inbox.append('dave', '0000000000000001', MsgKind.user);
    assert.deepEqual(res.nodes, ['node-b'], 'the append found dave\'s connection expired: node B is not notified');
  } finally {
    skewed.mock.restore();
    await registry.stop();
  }
});

test('a registration that lapsed is removed by the next renewal of any node and never taken for live: its node\'s presence is not reported', async () => {
  // A user and a node of this test's own: the test before leaves erin's entry of node-lapsed
  // behind when it fails before its list prunes it.
  const [sec] = await redis.time();
  // node-unrenewed's registration ran out 1 s ago (by Redis's clock); it never renewed.
  await redis.zadd(keys.nodes(), String(Number(sec) * 1000 - 1000), 'node-unrenewed');
  await redis.hset(keys.conns('gwen'), 'c-lapsed', entry(Date.now() + 60_000, 'node-unrenewed', 'phone'));
  const r = node('node-renewing');
  await r.registry.start(); // its first renewal
  try {
    assert.equal(await redis.zscore(keys.nodes(), 'node-unrenewed'), null, 'the renewal removed the lapsed registration');
    assert.deepEqual([...await r.registry.liveAmong(['node-unrenewed', 'node-renewing'])], ['node-renewing']);
    assert.deepEqual(await r.presence.list('gwen'), [], 'the entry of the lapsed node is not reported');
    assert.deepEqual(await redis.hgetall(keys.conns('gwen')), {}, 'and it is pruned');
  } finally {
    await r.registry.stop();
  }
});

test('a user\'s presence hash expires on its own, at least as late as its newest entry: a crashed node\'s users leave nothing behind for good', async () => {
  const ttlMs = 30_000;
  const presence = new Presence(redis, keys, { node: 'n-ttl', ttlMs, maxPerUser: 5, liveNodes: async (nodes) => new Set(nodes) });
  const conns = keys.conns('fay');
  assert.equal((await presence.add('fay', 'c1', 'phone', Date.now())).admitted, true);
  const afterAdd = await redis.pttl(conns);
  assert.ok(afterAdd > 0 && afterAdd <= ttlMs, `PTTL after add: ${afterAdd}`);
  // A hash about to lapse is kept alive by each entry it gets: a new one, a refresh.
  await redis.pexpire(conns, 1000);
  assert.equal((await presence.add('fay', 'c2', 'laptop', Date.now())).admitted, true);
  assert.ok(await redis.pttl(conns) > ttlMs - 5000, 'an add extends the hash to its entry\'s lifetime');
  await redis.pexpire(conns, 1000);
  assert.equal(await presence.refresh('fay', 'c1', 'phone', Date.now()), 'kept');
  assert.ok(await redis.pttl(conns) > ttlMs - 5000, 'a refresh extends it too');
  // Never shortened: a hash living longer keeps its expiry.
  await redis.pexpire(conns, 10 * ttlMs);
  assert.equal(await presence.refresh('fay', 'c2', 'laptop', Date.now()), 'kept');
  assert.ok(await redis.pttl(conns) > 9 * ttlMs, 'a refresh does not shorten it');
  // Nor does an add, which drops the entries past their expiry as it goes.
  await redis.hset(conns, 'c-stale', entry(Date.now() - 1, 'n-ttl', 'watch'));
  assert.equal((await presence.add('fay', 'c3', 'tablet', Date.now())).admitted, true);
  assert.ok(await redis.pttl(conns) > 9 * ttlMs, 'an add does not shorten it');
  assert.equal(await redis.hexists(conns, 'c-stale'), 0, 'the expired entry is gone');
});

test('a registration is written for its whole TTL, several renewals ahead: a renewal a little late does not make the node look gone', async () => {
  const registry = new NodeRegistry(redis, keys, { node: 'node-ttl', intervalMs: 5000, ttlMs: 15_000, logger: createLogger('silent') });
  await registry.start();
  try {
    const [sec, usec] = await redis.time();
    const redisNow = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
    const ahead = Number(await redis.zscore(keys.nodes(), 'node-ttl')) - redisNow;
    assert.ok(ahead > 13_000 && ahead <= 15_000, `registered for ${ahead} ms more`);
  } finally {
    await registry.stop();
  }
});
