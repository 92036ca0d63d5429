/**
 * A live node's connections stay known to the other nodes through what can take them
 * out of Redis's view (DESIGN.md §9; docs/decisions.md "Several nodes"):
 *
 * - A node whose registration lapsed while it was alive (its renewals failed for 15 s:
 *   Redis slow for it, a long stall), or whose Redis was flushed, has its connections'
 *   presence entries pruned (lapse) or dropped (FLUSHALL). The renewal that registers
 *   it again brings every connection's heartbeat forward, so presence is written back
 *   within about a second (src/cluster/node-registry.ts `onRegisteredAgain`). Before,
 *   they came back only at each connection's next server heartbeat (up to
 *   PIXIU_HEARTBEAT, 25 s): meanwhile an append on another node for such a user named
 *   no node to notify, presence said the user was offline, and the connection limit
 *   did not count those connections.
 * - `DELETE /v1/users/{uid}/connections` sends its kick over Pub/Sub and removes the
 *   presence entries. A PUBLISH that reaches no subscriber is dropped, also when the
 *   node is alive and only its subscriber is reconnecting (Redis's pubsub output-buffer
 *   limit, a network blip, CLIENT KILL). Such a kick is sent again, naming each
 *   connection, while the node is registered (src/gateway/gateway.ts). Before, the
 *   DELETE answered `closed: 1` and the connection stayed open for good.
 *
 * Two in-process nodes A and B on one private redis-server, heartbeat 25 s.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import { openInbox, waitUntil } from '../harness/checks.js';
import type { RedisServer } from '../harness/redis-server.js';
import { fileRedis } from '../harness/file-redis.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';

const keys = new Keys('px:');
let redis: RedisServer;
let raw: Redis;
let a: GatewayFixture;
let b: GatewayFixture;

fileRedis(async ({ redis: server, cleanup }) => {
  redis = server;
  const settings = { redisUrl: redis.url, heartbeatMs: '25s' };
  a = await startGateway(cleanup, settings);
  b = await startGateway(cleanup, settings);
  ({ redis: raw } = await openInbox(cleanup, redis.url));
});

async function online(on: GatewayFixture, user: string): Promise<boolean> {
  const answer = await on.client.get(`/v1/users/${user}/presence`);
  assert.equal(answer.status, 200, answer.text);
  return (answer.body as { online: boolean }).online;
}

test('after its registration lapsed, a live node\'s user is notified again within seconds of it registering again, not at its next heartbeat', { timeout: 60_000 }, async () => {
  const { client, welcome } = await b.connectWelcomed('lapse', { device: 'phone' });
  assert.equal(welcome.t, 'welcome');
  assert.equal(await online(a, 'lapse'), true);
  // B's registration lapses (its renewals do not reach Redis: here they are undone as
  // soon as they land, for 6 s, so that A's own renewal sees B gone); A's next presence
  // read prunes B's entry, as it must for a node that looks dead.
  const bNode = (await raw.hvals(keys.conns('lapse')))[0]?.split('|')[1] as string;
  const until = Date.now() + 6000;
  while (Date.now() < until) {
    await raw.zrem(keys.nodes(), bNode);
    await new Promise((r) => setTimeout(r, 20));
  }
  await raw.zrem(keys.nodes(), bNode);
  assert.equal(await online(a, 'lapse'), false, 'pruned while B looked dead');
  // B renews within 5 s (its registry interval) and is registered again.
  await waitUntil('B registered again', async () => (await raw.zscore(keys.nodes(), bNode)) !== null, 7000);
  const registeredAt = Date.now();
  // B writes its presence back within seconds of registering again, not at its next
  // heartbeat (25 s).
  await waitUntil('B\'s entry back in presence', () => online(a, 'lapse'), 5000);
  const [seq] = await a.post('lapse');
  const started = Date.now();
  const frame = await client.next(30_000);
  const tookMs = Date.now() - started;
  assert.equal(frame.t, 'msg', JSON.stringify(frame));
  assert.equal(frame.seq, seq);
  assert.ok(tookMs < 1500,
    `posted on A ${Date.now() - registeredAt - tookMs} ms after B registered again, the msg reached B's device after ${tookMs} ms (B's entry was back in presence: ${await online(a, 'lapse')})`);
});

test('after a FLUSHALL, a live node\'s connections are back in presence within seconds, not at their next heartbeat', { timeout: 60_000 }, async () => {
  await b.connectWelcomed('flushed', { device: 'phone' });
  assert.equal(await online(a, 'flushed'), true);
  await raw.flushall();
  const started = Date.now();
  // Each node registers again within 5 s (one renewal).
  let back = false;
  while (Date.now() - started < 30_000 && !back) {
    back = await online(a, 'flushed');
    if (!back) await new Promise((r) => setTimeout(r, 250));
  }
  const tookMs = Date.now() - started;
  assert.ok(back && tookMs < 8000, `the connection on B was missing from presence for ${tookMs} ms after the FLUSHALL (back: ${back})`);
});

test('a DELETE made while the holding node\'s subscriber reconnects still closes the connection', { timeout: 60_000 }, async () => {
  const { client } = await b.connectWelcomed('banned', { device: 'phone' });
  // B's bus subscriber (and A's) is dropped by Redis; ioredis reconnects after 100 ms or more.
  await raw.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
  const answer = await a.client.request('DELETE', '/v1/users/banned/connections');
  assert.equal(answer.status, 200, answer.text);
  assert.deepEqual(answer.body, { user: 'banned', closed: 1 });
  // The connection must close (1008) within a few seconds.
  const closed = await Promise.race([client.closed, new Promise<undefined>((r) => setTimeout(() => r(undefined), 8000).unref())]);
  assert.ok(closed !== undefined, '8 s after a DELETE that answered closed: 1, the connection is still open');
  assert.equal(closed.code, 1008);
});

test('a registration found lapsed but still listed (no other node renewed to remove it) counts as lapsed: the node writes its presence back at that renewal', { timeout: 60_000 }, async (t) => {
  // A node alone on its prefix: nobody else removes its lapsed registration.
  const alone = new Keys('alone:');
  const c = await startGateway(t, { redisUrl: redis.url, heartbeatMs: '25s', redisPrefix: alone.prefix });
  await c.connectWelcomed('stalled', { device: 'phone' });
  const [conn, value] = Object.entries(await raw.hgetall(alone.conns('stalled')))[0] as [string, string];
  const node = value.split('|')[1] as string;
  // Its renewals came too late (a stall): its registration's expiry is past, and the
  // other nodes' readers pruned its connection meanwhile.
  await raw.zadd(alone.nodes(), String(Date.now() - 1000), node);
  await raw.hdel(alone.conns('stalled'), conn);
  // Its next renewal (within 5 s) finds it lapsed and writes the entry back, not its next heartbeat (25 s).
  await waitUntil('the entry written back', async () => (await raw.hexists(alone.conns('stalled'), conn)) === 1, 8000);
});
