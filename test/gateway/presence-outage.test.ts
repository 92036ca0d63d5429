/**
 * Presence entries of connections that close while Redis is down (DESIGN.md §4 `conns`,
 * §6 the per-user limit; src/cluster/presence-removals.ts): the node keeps the removals
 * that failed and makes them once Redis is back, so the closed devices stop showing as
 * online and their slots are free again within about a second — not only when the
 * entries expire (two heartbeats and 5 s: ~55 s by default, during which new devices
 * got 429, a fresh-user finding).
 *
 * The Redis is a private one with AOF on, stopped and restarted on the same data, so
 * the entries written before the outage are there after it.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import { metricSample, openInbox, waitUntil, whenConnected } from '../harness/checks.js';
import { cleanupList, type PixiuClient } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { expectRefused, startGateway } from './gateway-fixture.js';
import type { ConnectionView as Conn } from '../../src/gateway/presence-routes.js';

const PREFIX = 'pres-out:';
/** Short, so a stopped Redis fails each command quickly. */
const COMMAND_TIMEOUT_MS = 500;
/** Bound on the service's reconnect once Redis is back (its back-off tops out at 2 s). */
const RECOVERY_BOUND_MS = 15_000;
/** Bound on the removals after that: they are retried each second. */
const RETRY_BOUND_MS = 5_000;

let redis: RedisServer;
let raw: Redis;
const keys = new Keys(PREFIX);
const files = cleanupList();

before(async () => {
  redis = await RedisServer.start({ aof: true });
  files.after(() => redis.destroy());
  ({ redis: raw } = await openInbox(files, redis.url, PREFIX));
});

after(() => files.run());

/** The service's `pixiu_presence_removals_pending`. */
async function pendingRemovals(client: PixiuClient): Promise<number> {
  const value = metricSample((await client.get('/metrics')).text, 'pixiu_presence_removals_pending');
  assert.ok(value !== undefined, 'the gauge is exported');
  return value;
}

/** The devices `GET /v1/users/{user}/presence` lists. */
async function listedDevices(client: PixiuClient, user: string): Promise<string[]> {
  const answer = await client.get(`/v1/users/${user}/presence`);
  assert.equal(answer.status, 200, answer.text);
  return (answer.body as { connections: Conn[] }).connections.map((c) => c.device).sort();
}

test('connections closed while Redis is down are removed from presence once it is back: listed no more, their slots free', { timeout: 60_000 }, async (t) => {
  const gw = await startGateway(t, {
    redisUrl: redis.url, redisPrefix: PREFIX, redisCommandTimeoutMs: String(COMMAND_TIMEOUT_MS), maxConnectionsPerUser: '2',
  });
  const { client: a } = await gw.connectWelcomed('olga', { device: 'a' });
  const { client: b } = await gw.connectWelcomed('olga', { device: 'b' });
  assert.deepEqual(await listedDevices(gw.client, 'olga'), ['a', 'b']);
  await expectRefused(gw.connect('olga', { device: 'c' }), 429, 'RATE_LIMITED');
  assert.equal(await pendingRemovals(gw.client), 0);

  await redis.stop();
  try {
    await a.close();
    await b.close();
    // Both removals failed (Redis is down) and are kept.
    await waitUntil('both removals are pending', async () => (await pendingRemovals(gw.client)) === 2, 10_000);
  } finally {
    await redis.restart();
  }
  // The entries survived the restart (AOF): only the retry can remove them now.
  await whenConnected(raw, RECOVERY_BOUND_MS);
  await waitUntil('/readyz is 200', async () => (await gw.client.get('/readyz')).status === 200, RECOVERY_BOUND_MS);

  // Removed without any new connection of the user asking for it.
  await waitUntil('the pending removals are done', async () => (await pendingRemovals(gw.client)) === 0, RETRY_BOUND_MS);
  assert.deepEqual(await raw.hkeys(keys.conns('olga')), [], 'no entry left in Redis');
  assert.deepEqual(await listedDevices(gw.client, 'olga'), []);
  // Both slots are free again.
  await gw.connectWelcomed('olga', { device: 'c' });
  await gw.connectWelcomed('olga', { device: 'd' });
  assert.deepEqual(await listedDevices(gw.client, 'olga'), ['c', 'd']);
});
