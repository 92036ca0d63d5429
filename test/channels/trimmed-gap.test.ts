/**
 * docs/protocol.md "Channels": a `sub` whose `since` the channel's history has trimmed
 * past is told so — `gap {stream: "channel", channel, from: <since>, to: <first
 * retained id>}` before the retained publications — as a broadcast `last_bseq` is
 * (an evaluator's finding: it got what was left and no signal). A `since` inside the
 * history (the newest trimmed id itself included: nothing after it is missing) gets no
 * gap; `0-0` gets one from `0-0` once the history has trimmed anything, as
 * `last_bseq=0-0` does. Each gap counts in `pixiu_channel_gaps_total`. Real Redis, the
 * real service (a history of 3), real WebSocket clients.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { openInbox } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { gapCounts, startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import type { TestClient } from '../harness/ws-client.js';
import { connectWith, expectPub, pubIds, publish, publishMany, subscribe } from './channel-fixture.js';

let gw: GatewayFixture;
let probe: Redis;

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed', channelHistory: '3' });
  probe = (await openInbox(cleanup, redis.url)).redis;
});

/** A live publication on `channel` is the next frame: nothing else was on its way. */
async function expectNextLive(client: TestClient, channel: string): Promise<void> {
  const live = await publish(gw.client, channel, 'live');
  await expectPub(client, channel, live, 'live');
}

test('a since the history trimmed past gets a gap from it to the first retained publication, then the retained ones in order, then live', async () => {
  const channel = 'tg.a';
  const ids = await publishMany(gw.client, channel, 7);
  // The history keeps 5..7; 1..4 are trimmed, the newest of them recorded.
  assert.equal(await probe.xlen(`px:ch:{${channel}}:history`), 3);
  const before = (await gapCounts(gw)).channel;
  const client = await connectWith(gw, 'tg-a', ['tg.*']);
  assert.equal(await subscribe(client, channel, ids[1]), ids[1], 'subscribed gives the since it starts after');
  assert.deepEqual(await client.next(), { t: 'gap', stream: 'channel', channel, from: ids[1], to: ids[4] }, 'publications 3 and 4 are gone');
  for (let i = 5; i <= 7; i++) await expectPub(client, channel, ids[i - 1] as string, i);
  await expectNextLive(client, channel);
  assert.equal((await gapCounts(gw)).channel, (before ?? 0) + 1, 'the gap is counted');
});

test('a since inside the history gets no gap: the newest trimmed id itself, and a retained one', async () => {
  const channel = 'tg.b';
  const ids = await publishMany(gw.client, channel, 6);
  const before = (await gapCounts(gw)).channel;
  // 3 is the newest trimmed: nothing after it is missing.
  const edge = await connectWith(gw, 'tg-b1', ['tg.*']);
  await subscribe(edge, channel, ids[2]);
  assert.deepEqual(await pubIds(edge, 3), ids.slice(3));
  const inside = await connectWith(gw, 'tg-b2', ['tg.*']);
  await subscribe(inside, channel, ids[4]);
  assert.deepEqual(await pubIds(inside, 1), ids.slice(5));
  const live = await publish(gw.client, channel, 'live');
  for (const client of [edge, inside]) await expectPub(client, channel, live, 'live');
  assert.equal((await gapCounts(gw)).channel, before, 'no gap counted');
});

test('since 0-0 gets the whole history with no gap while nothing was trimmed, and a gap from 0-0 once the history has trimmed (as last_bseq=0-0)', async () => {
  const channel = 'tg.c';
  const ids = await publishMany(gw.client, channel, 3);
  const whole = await connectWith(gw, 'tg-c1', ['tg.*']);
  assert.equal(await subscribe(whole, channel, '0-0'), '0-0');
  assert.deepEqual(await pubIds(whole, 3), ids, 'no gap: the history trimmed nothing');
  const more = [await publish(gw.client, channel, 4)];
  await expectPub(whole, channel, more[0] as string, 4);
  const trimmed = await connectWith(gw, 'tg-c2', ['tg.*']);
  assert.equal(await subscribe(trimmed, channel, '0-0'), '0-0');
  assert.deepEqual(await trimmed.next(), { t: 'gap', stream: 'channel', channel, from: '0-0', to: ids[1] }, 'publication 1 is gone');
  assert.deepEqual(await pubIds(trimmed, 3), [ids[1], ids[2], more[0]]);
  await expectNextLive(trimmed, channel);
});
