/**
 * An append on a node whose machine clock runs ahead (src/service/service.ts: the
 * inbox judges presence entries by Redis's clock, the node registry's): the node
 * holding the recipient's connection is notified at once. Judged by the appending
 * node's own clock, 2 minutes ahead, every entry (written by Redis's clock, ~55 s of
 * life) looked expired, no node was notified, and the message waited for the device's
 * next heartbeat (25 s). Node B in process holds the device; node A is a `pixiu serve`
 * whose clock is 2 minutes ahead (test/harness/clock-offset.mjs).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cliEntry, PixiuClient, spawnListening, tempDataDir } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { JWT_SECRET, startGateway } from '../gateway/gateway-fixture.js';

const TOKEN = 'clock-ahead-notify-token-0123456789';

test('a message posted on a node whose clock is 2 minutes ahead reaches the device on the other node at once, not at its next heartbeat', { timeout: 60_000 }, async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const b = await startGateway(t, { redisUrl: redis.url });
  const preload = new URL('../harness/clock-offset.mjs', import.meta.url).pathname;
  const a = await spawnListening(['--import', preload, ...cliEntry(), 'serve'], {
    PIXIU_REDIS_URL: redis.url, PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_PORT: '0', PIXIU_API_TOKEN: TOKEN,
    PIXIU_JWT_SECRET: JWT_SECRET, PIXIU_STORE_DURABILITY: 'relaxed', PIXIU_CLAIMS_SETTLE: '0', CLOCK_OFFSET_MS: String(120_000),
  }, t, 'pixiu listening', { tsx: false });
  const { client } = await b.connectWelcomed('clocky', { device: 'phone' });
  const sent = await new PixiuClient(a.url, TOKEN).post('/v1/messages', { to: 'clocky', type: 't', data: 'ahead' });
  assert.equal(sent.status, 201, sent.text);
  const frame = await client.next(5000);
  assert.equal(frame.t, 'msg', JSON.stringify(frame));
  assert.equal(frame.data, 'ahead');
});
