/**
 * NodeRegistry.redisClock, Redis's clock counted on from its `TIME` at the last renewal
 * on the monotonic clock, is a lower bound on Redis's time: it is anchored at the
 * answer, not at the middle of the round trip (review-clock R4). Redis reads its clock
 * somewhere within the round trip; anchored at the middle, a `TIME` that waited before
 * Redis ran it (an offline queue while the renewals connection reconnected, a Redis
 * held by a slow command) made it run ahead of Redis by up to half the round trip — past
 * a second, an in-step node's messages then expired later than `ts` + `ttl`
 * (src/store/record.ts) and its sweeps' cap (sweep-clock.ts) moved ahead of Redis's.
 *
 * A registry against a private redis-server whose renewals connection holds each
 * `TIME` 800 ms before sending it (Redis then reads its clock at the end of the round
 * trip); Redis runs on this machine's clock.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import { redisNowMs } from '../../src/redis/client.js';
import { NodeRegistry } from '../../src/cluster/node-registry.js';
import { openInbox } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

const cleanup = cleanupList();
let redis: Redis;
let renewals: Redis;

before(async () => {
  const server = await RedisServer.start();
  cleanup.after(() => server.destroy());
  ({ redis } = await openInbox(cleanup, server.url));
  ({ redis: renewals } = await openInbox(cleanup, server.url));
  const time = renewals.time.bind(renewals);
  // Held before it is sent: Redis reads its clock 800 ms into the round trip.
  (renewals as unknown as { time: () => Promise<unknown> }).time = async () => {
    await sleep(800);
    return time();
  };
});

after(() => cleanup.run());

test('redisClock never runs ahead of Redis\'s clock, though Redis read it at the end of a slow TIME round trip', async () => {
  const { logger } = capturingLogger();
  const registry = new NodeRegistry(redis, new Keys('anchor:'), { node: 'anchor-node', intervalMs: 60_000, ttlMs: 180_000, logger, renewals });
  await registry.start();
  cleanup.after(() => registry.stop());
  const clock = registry.redisClock();
  const truth = await redisNowMs(redis);
  assert.ok(clock !== undefined && clock <= truth, `redisClock ${clock === undefined ? 'undefined' : clock - truth} ms from Redis's TIME read after it`);
  assert.ok(clock > truth - 1000, `within a second of it (${clock - truth} ms)`);
});
