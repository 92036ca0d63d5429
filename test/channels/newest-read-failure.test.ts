/**
 * A `sub` with `since` whose read of the channel's newest publication fails (the first
 * read of its catch-up, src/channels/connection-channels.ts) is answered UNAVAILABLE and
 * follows nothing: a live publication that arrived between the join and that failure
 * is not sent before the error (docs/protocol.md "Channels": a client retrying with
 * `since` the last id it got must not skip the history in between).
 *
 * The failure is made in-process, deterministically: the node's XREVRANGE of the
 * channel's history first waits until a live publication has reached the node, then
 * fails as a dropped connection does. A real gateway on a private redis-server.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { openInbox } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { connectWith, publish, waitTopics } from './channel-fixture.js';

let gw: GatewayFixture;
/** The test's own Redis connection, to read the node's Pub/Sub subscriptions. */
let probe: Redis;
fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed' });
  probe = (await openInbox(cleanup, redis.url)).redis;
});

const CHANNEL = 'n.one';
/** Resolves the next time the node has handled a Pub/Sub message of CHANNEL. */
let onLive: (() => void) | undefined;
/** Armed: the next XREVRANGE of CHANNEL's history publishes live first, then fails. */
let armed = false;

const emit = Redis.prototype.emit;
Redis.prototype.emit = function (this: Redis, event: string | symbol, ...args: unknown[]): boolean {
  const handled = emit.call(this, event, ...args);
  if (event === 'message' && String(args[0]).endsWith(CHANNEL)) onLive?.();
  return handled;
} as typeof Redis.prototype.emit;

const xrevrange = Redis.prototype.xrevrange;
Redis.prototype.xrevrange = function (this: Redis, ...args: unknown[]) {
  if (!armed || !String(args[0]).includes(CHANNEL)) return (xrevrange as (...a: unknown[]) => unknown).apply(this, args);
  armed = false;
  const live = new Promise<void>((resolve) => { onLive = resolve; });
  return publish(gw.client, CHANNEL, 'live')
    .then(() => live)
    .then(() => { throw new Error('Connection is closed.'); });
} as typeof Redis.prototype.xrevrange;

after(() => {
  Redis.prototype.emit = emit;
  Redis.prototype.xrevrange = xrevrange;
});

test('a sub whose newest-id read fails sends no live publication that arrived meanwhile before its UNAVAILABLE, and leaves the node subscribed to no channel nobody follows', async () => {
  const client = await connectWith(gw, 'newest', ['n.*']);
  await publish(gw.client, CHANNEL, 'old');
  armed = true;
  client.send({ t: 'sub', channel: CHANNEL, since: '0-0' });
  client.send({ t: 'ping' });
  const frames: unknown[] = [];
  for (;;) {
    const f = await client.next(10_000);
    if (f.t === 'pong') break;
    frames.push(f.t === 'error' ? [f.t, f.code] : [f.t, f.data]);
  }
  assert.equal(armed, false, 'the failing read was made');
  assert.deepEqual(frames, [['error', 'UNAVAILABLE']]);
  // The sub follows nothing: the node drops the channel's Pub/Sub subscription, the
  // connection still open (no other subscriber here).
  await waitTopics(probe, 'px:', { [CHANNEL]: false });
});
