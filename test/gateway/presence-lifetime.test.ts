/**
 * A presence entry's lifetime (docs/decisions.md, docs/api.md "Presence"): written
 * with an expiry two heartbeats and 5 s ahead (by Redis's clock), so one late or
 * missed refresh never drops a live connection from presence. Read from the entry
 * itself in Redis (`px:{uid}:conns`: expires-at|node|device|since), not waited for.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import { openInbox, waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { startGateway, type GatewayFixture } from './gateway-fixture.js';

const HEARTBEAT_MS = 1000;
let gw: GatewayFixture;
let raw: Redis;
const keys = new Keys('px:');

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url, heartbeatMs: String(HEARTBEAT_MS) });
  ({ redis: raw } = await openInbox(cleanup, redis.url));
});

/** Now by Redis's clock, ms. */
async function redisNow(): Promise<number> {
  const [s, us] = await raw.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** How far ahead of Redis's clock `user`'s single entry expires, ms; undefined while it has none. */
async function expiresIn(user: string): Promise<number | undefined> {
  const entries = Object.values(await raw.hgetall(keys.conns(user)));
  if (entries.length !== 1) return undefined;
  return Number((entries[0] as string).split('|')[0]) - await redisNow();
}

test('a connection\'s presence entry, as written at connect and at each heartbeat refresh, expires two heartbeats and 5 s ahead', async () => {
  const lifetime = 2 * HEARTBEAT_MS + 5000;
  await gw.connectWelcomed('lasting', { device: 'phone' });
  const atConnect = await expiresIn('lasting');
  assert.ok(atConnect !== undefined && atConnect > lifetime - 1000 && atConnect <= lifetime, `expires in ${atConnect} ms at connect`);
  // A refresh (the first heartbeat, within one period) pushes the expiry forward by as much.
  const first = Number((Object.values(await raw.hgetall(keys.conns('lasting')))[0] as string).split('|')[0]);
  await waitUntil('a heartbeat refreshed the entry', async () =>
    Number((Object.values(await raw.hgetall(keys.conns('lasting')))[0] as string).split('|')[0]) > first, 10_000);
  const refreshed = await expiresIn('lasting');
  assert.ok(refreshed !== undefined && refreshed > lifetime - 1000 && refreshed <= lifetime, `expires in ${refreshed} ms after a refresh`);
});
