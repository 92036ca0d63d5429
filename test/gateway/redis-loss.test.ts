/**
 * Redis restarted empty (no persistence) while devices stay connected (DESIGN.md §4,
 * §6): presence is lost with everything else, and each connection's heartbeat is 25 s
 * away. On the reconnect every connection's heartbeat is brought forward to within a
 * second, so presence is written back at once: the connection limit holds again
 * (6th device 429), and a new message reaches the connected devices as `reset` and
 * then the message without waiting for a heartbeat. After a FLUSHALL (no reconnect) the
 * connections write their entries back at their heartbeats, under the rules of a new
 * connection: a device that connected again meanwhile replaces its old connection
 * (4002), and the limit holds. Real Redis, the real service.
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
/** A second service (its own key prefix) with a 1 s heartbeat. */
let fast: GatewayFixture;
let probe: Redis;

fileRedis(async ({ redis: server, cleanup }) => {
  redis = server;
  // The default heartbeat (25 s): nothing here may wait for one.
  gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed', redisCommandTimeoutMs: '500' });
  fast = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed', redisPrefix: 'fast:', heartbeatMs: '1s' });
  probe = (await openInbox(cleanup, redis.url)).redis;
});

test('after Redis restarts empty, presence is back within seconds, the connection limit holds, and a new message arrives as reset then msg', async () => {
  const devices: TestClient[] = [];
  for (const device of ['d1', 'd2', 'd3']) devices.push((await gw.connectWelcomed('lost', { device })).client);
  await gw.post('lost');
  for (const d of devices) assert.equal((await d.next()).t, 'msg');

  // A key no node writes: gone, Redis came back empty (the presence key may be back
  // already, written again by the node before this probe reconnected).
  await probe.set('test:marker', '1');
  await redis.stop();
  await redis.restart();
  await whenConnected(probe);
  assert.equal(await probe.exists('test:marker'), 0, 'Redis came back empty');
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

test('after a FLUSHALL, a device that connected again replaces its old connection (4002) and the limit holds, once the old ones heartbeat', async () => {
  const old = new Map<string, TestClient>();
  for (const device of ['d1', 'd2', 'd3']) old.set(device, (await fast.connectWelcomed('flushed', { device })).client);
  await probe.flushall();
  // Presence is gone until each connection's next heartbeat (1 s here): meanwhile the
  // same device connects again, and more devices than the limit leaves room for try.
  const fresh: TestClient[] = [(await fast.connectWelcomed('flushed', { device: 'd1' })).client];
  for (const device of ['d4', 'd5', 'd6']) {
    try {
      fresh.push((await fast.connectWelcomed('flushed', { device })).client);
    } catch {
      // 429 when old connections were written back first: the limit held.
    }
  }
  // The old d1 is replaced, whoever was written first.
  assert.equal((await (old.get('d1') as TestClient).waitClose(8000)).code, 4002);
  // Two heartbeats later: each device once, at most the limit (5), in presence and open.
  const open = (): TestClient[] => [...old.values(), ...fresh].filter((c) => c.ws.readyState === c.ws.OPEN);
  await waitUntil('presence settles on the open connections', async () => {
    const listed = ((await fast.client.get('/v1/users/flushed/presence')).body as { connections: Array<{ device: string }> }).connections;
    return listed.length === open().length && open().length <= 5;
  }, 8000);
  const devices = ((await fast.client.get('/v1/users/flushed/presence')).body as { connections: Array<{ device: string }> }).connections.map((c) => c.device);
  assert.equal(new Set(devices).size, devices.length, `one connection per device: ${devices.join(',')}`);
  assert.ok(devices.length <= 5, `at most 5: ${devices.join(',')}`);
});

test('Redis stalled past the command timeout: the POST is 503, Redis makes the append anyway, and the retry (a duplicate) notifies the connected device at once', async (t) => {
  // A service of its own, started now: the append must be the first command the POST
  // sends. Where the node's client_msg_id claims are on (src/cluster/client-id-claims.ts:
  // a Redis shared by several stores, or one that names none, as after the FLUSHALL
  // above until the node's next lease renewal and the claims' next read, 5 s each),
  // the first is the claim instead, and the first attempt stores and appends nothing:
  // its retry is then 201, as docs/api.md says a retry completing what the first
  // attempt left undone is. On `gw` which one came first depended on those timers.
  const stall = await startGateway(t, { redisUrl: redis.url, storeDurability: 'relaxed', redisCommandTimeoutMs: '500', redisPrefix: 'stall:' });
  const { client: device } = await stall.connectWelcomed('stalled');
  await stall.post('stalled');
  assert.deepEqual([(await device.next()).seq], [1]);
  const body = { to: 'stalled', type: 't', data: 'stalled', client_msg_id: 'stalled-1' };
  // Writes wait 2 s; the service's command timeout is 500 ms.
  await probe.client('PAUSE', '2000', 'WRITE');
  const first = await stall.client.post('/v1/messages', body);
  assert.equal(first.status, 503, first.text);
  let retry = first;
  await waitUntil('a retry goes through once Redis writes again', async () => {
    retry = await stall.client.post('/v1/messages', body);
    return retry.status !== 503;
  }, 8000);
  // The first attempt's append ran when the pause ended: the retry found it.
  assert.equal(retry.status, 200, retry.text);
  assert.deepEqual(retry.body, { id: (retry.body as { id: string }).id, recipients: [{ user: 'stalled', seq: 2 }], duplicate: true });
  // Not at the next heartbeat (25 s away): now.
  const msg = await device.next(5000);
  assert.deepEqual([msg.t, msg.seq, msg.data], ['msg', 2, 'stalled'], JSON.stringify(msg));
});
