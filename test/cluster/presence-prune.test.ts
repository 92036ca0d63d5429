/**
 * Pruning presence (src/cluster/presence.ts, `presence-prune-1.lua`): entries judged
 * dead when read (expired, or of a node that is gone) are deleted only while they are
 * still what was read. An entry refreshed in between — its node registered again and
 * its connection's heartbeat wrote it — is kept; deleted, that user's notifies stopped
 * reaching the node until the next refresh. A private redis-server.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Presence } from '../../src/cluster/presence.js';
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
