/**
 * Redis restarted empty (no persistence) while devices stay connected (DESIGN.md §4,
 * §6): presence is lost with everything else, and each connection's heartbeat is 25 s
 * away. On the reconnect every connection's heartbeat is brought forward to within a
 * second, so presence is written back at once: the connection limit holds again
 * (6th device 429), and a new message reaches the connected devices as `reset` and
 * then the message without waiting for a heartbeat. Real Redis, the real service.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { openInbox, waitUntil, whenConnected } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import type { RedisServer } from '../harness/redis-server.js';
import type { TestClient } from '../harness/ws-client.js';
import { expectRefused, startGateway, type GatewayFixture } from './gateway-fixture.js';

let redis: RedisServer;
let gw: GatewayFixture;
let probe: Redis;

fileRedis(async ({ redis: server, cleanup }) => {
  redis = server;
  // The default heartbeat (25 s): nothing here may wait for one.
  gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed', redisCommandTimeoutMs: '500' });
  probe = (await openInbox(cleanup, redis.url)).redis;
});

test('after Redis restarts empty, presence is back within seconds, the connection limit holds, and a new message arrives as reset then msg', async () => {
  const devices: TestClient[] = [];
  for (const device of ['d1', 'd2', 'd3']) devices.push((await gw.connectWelcomed('lost', { device })).client);
  await gw.post('lost');
  for (const d of devices) assert.equal((await d.next()).t, 'msg');

  await redis.stop();
  await redis.restart();
  await whenConnected(probe);
  assert.equal(await probe.exists('px:{lost}:conns'), 0, 'Redis came back empty');
  await waitUntil('presence lists the three devices again', async () => {
    const answer = await gw.client.get('/v1/users/lost/presence');
    return answer.status === 200 && (answer.body as { connections: unknown[] }).connections.length === 3;
  }, 8000);

  await gw.connectWelcomed('lost', { device: 'd4' });
  await gw.connectWelcomed('lost', { device: 'd5' });
  await expectRefused(gw.connect('lost', { device: 'd6' }), 429, 'RATE_LIMITED');

  const [seq] = await gw.post('lost');
  assert.equal(seq, 1, 'a new inbox');
  for (const d of devices) {
    const reset = await d.next(8000);
    assert.equal(reset.t, 'reset', JSON.stringify(reset));
    const msg = await d.next(8000);
    assert.deepEqual([msg.t, msg.seq], ['msg', 1], JSON.stringify(msg));
  }
});
