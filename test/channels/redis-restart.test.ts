/**
 * Channels across a Redis restart (DESIGN.md §8, §11): the node's Pub/Sub
 * subscriptions come back by themselves, so subscribers keep receiving without
 * re-subscribing; a subscriber that leaves while Redis is down leaves no
 * subscription behind once Redis is back; a `sub` while Redis is down is refused with
 * an `error` frame (UNAVAILABLE) and works when retried after. Its own redis-server,
 * restarted on the same port.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { openInbox, waitUntil, whenConnected } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import type { RedisServer } from '../harness/redis-server.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { connectWith, expectErrorFrame, expectPub, publish, subscribe, waitTopics } from './channel-fixture.js';

let redis: RedisServer;
let gw: GatewayFixture;
let probe: Redis;
const P = 'px:';

fileRedis(async ({ redis: server, cleanup }) => {
  redis = server;
  gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed', redisCommandTimeoutMs: '500' });
  probe = (await openInbox(cleanup, redis.url)).redis;
});

test('after a Redis restart, subscribers keep receiving; one that left during the outage leaves nothing behind', async () => {
  const stays = await connectWith(gw, 'stays', ['r.*']);
  const leaves = await connectWith(gw, 'leaves', ['r.*']);
  await subscribe(stays, probe, P, 'r.kept');
  await subscribe(leaves, probe, P, 'r.dropped');

  await redis.stop();
  leaves.send({ t: 'unsub', channel: 'r.dropped' });
  leaves.send({ t: 'ping' });
  assert.deepEqual(await leaves.next(), { t: 'pong' });
  // A sub while Redis is down is refused, and the connection stays open.
  stays.send({ t: 'sub', channel: 'r.later' });
  await expectErrorFrame(stays, 'UNAVAILABLE');
  await redis.restart();
  await whenConnected(probe);
  // The service's own connection reconnects on its back-off, maybe after the probe's.
  await waitUntil('the service answers /readyz again', async () => (await gw.client.get('/readyz')).status === 200);

  await waitTopics(probe, P, { 'r.kept': true, 'r.dropped': false, 'r.later': false });
  const id = await publish(gw.client, 'r.kept', 'after restart');
  await expectPub(stays, 'r.kept', id, 'after restart');
  await subscribe(stays, probe, P, 'r.later');
  const later = await publish(gw.client, 'r.later', 'retried');
  await expectPub(stays, 'r.later', later, 'retried');
});
