/**
 * Channels across a Redis restart (DESIGN.md §8, §11): the node's Pub/Sub
 * subscriptions come back by themselves, so subscribers keep receiving without
 * re-subscribing; a subscriber that leaves while Redis is down leaves no
 * subscription behind once Redis is back; a `sub` while Redis is down is refused with
 * an `error` frame (UNAVAILABLE) and works when retried after; a re-subscribe that
 * Redis refuses after a reconnect neither crashes the process nor loses the channel
 * for good. Its own redis-server, restarted on the same port.
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
  await subscribe(stays, 'r.kept');
  await subscribe(leaves, 'r.dropped');

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
  await subscribe(stays, 'r.later');
  const later = await publish(gw.client, 'r.later', 'retried');
  await expectPub(stays, 'r.later', later, 'retried');
});

/** The `id` of the service's subscriber connection (`pixiu:bus:<node>`), from CLIENT LIST. */
async function subscriberId(): Promise<string | undefined> {
  const list = await probe.client('LIST') as string;
  return /\bid=(\d+)\b[^\n]*\bname=pixiu:bus:/.exec(list)?.[1];
}

test('a re-subscribe refused after a reconnect (NOPERM) crashes nothing, and the next reconnect subscribes the channel again', async (t) => {
  // ioredis 6.0.0 re-subscribes after a reconnect with a promise no one handles: refused,
  // it was an unhandled rejection (the process's end), and the channel was then forgotten.
  const unhandled: unknown[] = [];
  const onUnhandled = (err: unknown): void => { unhandled.push(err); };
  process.on('unhandledRejection', onUnhandled);
  t.after(async () => {
    process.off('unhandledRejection', onUnhandled);
    await probe.acl('SETUSER', 'default', 'allchannels');
  });
  const client = await connectWith(gw, 'perm', ['q.*']);
  await subscribe(client, 'q.one');
  await probe.acl('LOG', 'RESET');
  // Redis disconnects a subscriber whose channels its user may no longer follow; the
  // re-subscribe on the way back is refused, and Redis logs the denied topic.
  await probe.acl('SETUSER', 'default', 'resetchannels');
  await waitUntil('the re-subscribe is refused', async () => {
    // An entry names the client (the node's subscriber) and the first channel denied.
    return JSON.stringify(await probe.acl('LOG')).includes('name=pixiu:bus:');
  });
  await probe.acl('SETUSER', 'default', 'allchannels');
  await waitUntil('the subscriber is connected again', async () => (await subscriberId()) !== undefined);
  await probe.client('KILL', 'ID', await subscriberId() ?? '0');
  await waitTopics(probe, P, { 'q.one': true });
  // And the node's bus channel (notifies and kicks from other nodes) is followed again.
  const node = /\bname=pixiu:bus:(\S+)/.exec(await probe.client('LIST') as string)?.[1] ?? '';
  await waitUntil('the bus channel is followed again', async () => {
    const [, count] = await probe.pubsub('NUMSUB', `${P}node:${node}`) as [string, number];
    return Number(count) === 1;
  });
  const id = await publish(gw.client, 'q.one', 'after the refusal');
  await expectPub(client, 'q.one', id, 'after the refusal');
  assert.deepEqual(unhandled, []);
});
