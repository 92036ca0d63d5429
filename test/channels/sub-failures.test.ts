/**
 * A `sub` that fails on Redis follows nothing (docs/protocol.md "Channels": "Redis
 * unreachable: UNAVAILABLE, retry"; "A sub answered with an error follows nothing"),
 * and leaves the node subscribed to nothing (docs/decisions.md: one Pub/Sub
 * subscription per node and channel, "held exactly while the node has a local
 * subscriber"). Real gateways on a private redis-server; Redis made to fail with an ACL
 * (one command refused) or CLIENT PAUSE (a stall past the command timeout).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { openInbox } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { connectWith, numsub, publish, subscribe } from './channel-fixture.js';

let gw: GatewayFixture;
let slow: GatewayFixture;
let probe: Redis;
let redisUrl: string;
const P = 'rv1:';
const SLOW = 'rv2:';

fileRedis(async ({ redis, cleanup }) => {
  redisUrl = redis.url;
  gw = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: P, storeDurability: 'relaxed' });
  slow = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: SLOW, storeDurability: 'relaxed', redisCommandTimeoutMs: '200' });
  probe = (await openInbox(cleanup, redis.url)).redis;
});

test('a sub refused UNAVAILABLE follows nothing, and its retry (docs: "Redis unreachable: UNAVAILABLE, retry") catches up from since', async (t) => {
  t.after(() => probe.acl('SETUSER', 'default', '+xrevrange'));
  const client = await connectWith(gw, 'retrier', ['r.*']);
  const h1 = await publish(gw.client, 'r.one', 'h1');
  const h2 = await publish(gw.client, 'r.one', 'h2');
  // The catch-up's first read fails (Redis refuses it): the sub is answered UNAVAILABLE.
  await probe.acl('SETUSER', 'default', '-xrevrange');
  client.send({ t: 'sub', channel: 'r.one', since: '0-0' });
  const err = await client.next();
  assert.equal(err.t, 'error', JSON.stringify(err));
  assert.equal(err.code, 'UNAVAILABLE', JSON.stringify(err));
  await probe.acl('SETUSER', 'default', '+xrevrange');
  // The client retries, as told.
  assert.equal(await subscribe(client, 'r.one', '0-0'), '0-0');
  client.send({ t: 'ping' });
  const got: unknown[] = [];
  for (;;) {
    const f = await client.next();
    if (f.t === 'pong') break;
    got.push(f.t === 'pub' ? f.id : f);
  }
  assert.deepEqual(got, [h1, h2], 'the retried sub catches up from its since');
});

test('a sub refused UNAVAILABLE is not followed: a later publication is not delivered to it', async (t) => {
  t.after(() => probe.acl('SETUSER', 'default', '+xrevrange'));
  const client = await connectWith(gw, 'refused', ['s.*']);
  await publish(gw.client, 's.one', 'old');
  await probe.acl('SETUSER', 'default', '-xrevrange');
  client.send({ t: 'sub', channel: 's.one', since: '0-0' });
  const err = await client.next();
  assert.equal(err.code, 'UNAVAILABLE', JSON.stringify(err));
  await probe.acl('SETUSER', 'default', '+xrevrange');
  await publish(gw.client, 's.one', 'after the refusal');
  // A marker on a channel the client does follow: every frame before it is listed.
  await subscribe(client, 's.two');
  const marker = await publish(gw.client, 's.two', 'marker');
  const before: unknown[] = [];
  for (;;) {
    const f = await client.next();
    if (f.id === marker) break;
    before.push(f);
  }
  assert.deepEqual(before, [], 'nothing of the refused channel s.one arrives');
});

test('a SUBSCRIBE that timed out (sub answered UNAVAILABLE) leaves the node subscribed to no channel nobody follows; the retried sub follows it', async () => {
  const client = await connectWith(slow, 'slowsub', ['leak.*']);
  const pauser = new Redis(redisUrl, { lazyConnect: false });
  try {
    // Redis stalls for 1 s: the node's SUBSCRIBE outlives its 200 ms command timeout,
    // and is carried out when the stall ends.
    await pauser.client('PAUSE', 1000, 'ALL');
    client.send({ t: 'sub', channel: 'leak.one' });
    const err = await client.next(5000);
    assert.equal(err.t, 'error', JSON.stringify(err));
    assert.equal(err.code, 'UNAVAILABLE', JSON.stringify(err));
    assert.deepEqual(err.ref, { t: 'sub', channel: 'leak.one' });
    await probe.ping(); // answered once the stall is over
    // A later sub's SUBSCRIBE goes out on the same connection, after whatever the node
    // sent for leak.one: once it is in place, those were carried out too.
    await subscribe(client, 'leak.two');
    assert.deepEqual(await numsub(probe, SLOW, ['leak.one']), { 'leak.one': 0 }, 'no Pub/Sub subscription for a channel nobody follows');
    // The client retries, as told: the channel is followed this time.
    await subscribe(client, 'leak.one');
    const id = await publish(slow.client, 'leak.one', 'after the retry');
    const f = await client.next(5000);
    assert.deepEqual([f.t, f.channel, f.id], ['pub', 'leak.one', id], JSON.stringify(f));
  } finally {
    pauser.disconnect();
  }
});
