/**
 * A `refresh` whose token no longer allows a channel the connection follows drops it
 * (docs/protocol.md "Channels", docs/decisions.md "Channels"): the connection is told
 * with an `error` FORBIDDEN whose `ref` names it as a `sub`, and no publication of it
 * arrives after that frame; channels still allowed stay followed with no frame, and a
 * refresh with the same patterns changes nothing. Before, a narrower refresh applied
 * only to later `sub`s, so a backend that refreshed a user's token to revoke a live
 * channel found the connection still receiving it (a newcomer's report on rooms, point
 * 4). Real Redis, the real service, real WebSocket clients; "nothing more arrived" is
 * checked by a later publication on another channel being the next frame.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { openInbox } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { testToken, type Frame, type TestClient } from '../harness/ws-client.js';
import { JWT_KEY, startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { connectWith, expectErrorFrame, expectPub, publish, subscribe, waitTopics } from './channel-fixture.js';

let gw: GatewayFixture;
let probe: Redis;
const P = 'chr:';

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: P, storeDurability: 'relaxed' });
  probe = (await openInbox(cleanup, redis.url)).redis;
});

/** The `error` frame a refresh sends for a channel it dropped. */
function dropped(channel: string, hint = ''): Frame {
  return {
    t: 'error', code: 'FORBIDDEN', ref: { t: 'sub', channel },
    message: `the refreshed token no longer allows channel ${channel}${hint}: unsubscribed`,
  };
}

test('a refresh to narrower patterns drops each channel they no longer allow, with an error frame naming it as a sub; the channels still allowed keep receiving', async () => {
  const user = 'narrowed';
  const client = await connectWith(gw, user, ['a.*', 'b.*']);
  for (const channel of ['a.one', 'a.two', 'b.one', 'b.two']) await subscribe(client, channel);
  client.send({ t: 'refresh', token: await testToken(JWT_KEY, user, { channels: ['a.two', 'b.*'] }) });
  client.send({ t: 'ping' });
  // Answered in the order of the frames: the refresh's errors, then the pong.
  assert.deepEqual([await client.next(), await client.next()], [dropped('a.one'), { t: 'pong' }]);
  // The node left the channel nobody here follows any more.
  await waitTopics(probe, P, { 'a.one': false, 'a.two': true, 'b.one': true, 'b.two': true });
  await publish(gw.client, 'a.one', 'revoked');
  for (const channel of ['a.two', 'b.one', 'b.two']) {
    const id = await publish(gw.client, channel, channel);
    await expectPub(client, channel, id, channel);
  }
  // A sub of the dropped channel is refused as any channel the token does not allow.
  client.send({ t: 'sub', channel: 'a.one' });
  await expectErrorFrame(client, 'FORBIDDEN', /^the token does not allow channel a\.one$/);
  assert.ok(!client.frames.some((f) => f.t === 'pub' && f.channel === 'a.one'), 'no publication of a.one after the refresh');
});

test('no publication of a dropped channel arrives after its error frame, also while it is being published to', async () => {
  const user = 'mid-stream';
  const client = await connectWith(gw, user, ['live.*']);
  await subscribe(client, 'live.revoked');
  await subscribe(client, 'live.kept');
  let publishing = true;
  // Publishes until told to stop (at least 20, at most 2,000: a failing test ends too).
  const publisher = (async () => {
    let n = 0;
    while ((publishing || n < 20) && n < 2000) await publish(gw.client, 'live.revoked', n++);
    return n;
  })();
  let error: Frame;
  try {
    // Some publications have arrived, more are on their way: refresh now.
    while (!client.frames.some((f) => f.t === 'pub')) await client.next();
    client.send({ t: 'refresh', token: await testToken(JWT_KEY, user, { channels: ['live.kept'] }) });
    error = await client.nextOf('error');
  } finally {
    publishing = false;
  }
  const published = await publisher;
  // At least one publication certainly made after the drop.
  await publish(gw.client, 'live.revoked', 'after');
  const marker = await publish(gw.client, 'live.kept', 'marker');
  const after: Frame[] = [];
  for (let f = await client.next(); f.id !== marker; f = await client.next()) after.push(f);
  assert.deepEqual(error, dropped('live.revoked'));
  assert.deepEqual(after, [], `nothing between the error and the marker (${published} published)`);
  const before = client.frames.slice(0, client.frames.indexOf(error));
  assert.ok(before.some((f) => f.channel === 'live.revoked'), 'publications arrived before the refresh');
});

test('a refresh with the same patterns, or wider ones, sends nothing and drops nothing', async () => {
  const user = 'same';
  const client = await connectWith(gw, user, ['s.*', 'exact']);
  await subscribe(client, 's.one');
  await subscribe(client, 'exact');
  for (const channels of [['s.*', 'exact'], ['exact', 's.*'], ['s.*', 'exact', 'more.*']]) {
    client.send({ t: 'refresh', token: await testToken(JWT_KEY, user, { channels }) });
    client.send({ t: 'ping' });
    assert.deepEqual(await client.next(), { t: 'pong' }, `refresh to ${JSON.stringify(channels)} answers nothing`);
  }
  const one = await publish(gw.client, 's.one', 1);
  await expectPub(client, 's.one', one, 1);
  const two = await publish(gw.client, 'exact', 2);
  await expectPub(client, 'exact', two, 2);
});

test('a refresh with a token without a channels claim drops every channel, each frame saying the claim is missing', async () => {
  const user = 'claim-dropped';
  const client = await connectWith(gw, user, ['c.*']);
  await subscribe(client, 'c.one');
  await subscribe(client, 'c.two');
  client.send({ t: 'refresh', token: await testToken(JWT_KEY, user) });
  client.send({ t: 'ping' });
  const hint = ' (the token has no channels claim: mint it with channels patterns, docs/protocol.md "Channels")';
  assert.deepEqual([await client.next(), await client.next(), await client.next()], [dropped('c.one', hint), dropped('c.two', hint), { t: 'pong' }]);
  await waitTopics(probe, P, { 'c.one': false, 'c.two': false });
});

test('a refused refresh drops nothing, and a refresh acts on its own connection only: another device of the user keeps the channel', async () => {
  const user = 'two-devices';
  const refreshed = await connectWith(gw, user, ['d.*']);
  const other = (await gw.connectWelcomed(user, { token: await testToken(JWT_KEY, user, { channels: ['d.*'] }), params: { from: 'latest', device: 'other' } })).client;
  await subscribe(refreshed, 'd.one');
  await subscribe(other, 'd.one');
  // Another user's token narrowing the patterns is refused: the channel stays.
  refreshed.send({ t: 'refresh', token: await testToken(JWT_KEY, 'someone-else', { channels: [] }) });
  await expectErrorFrame(refreshed, 'FORBIDDEN', /another user/);
  refreshed.send({ t: 'refresh', token: await testToken(JWT_KEY, user, { channels: ['e.*'] }) });
  assert.deepEqual(await refreshed.next(), dropped('d.one'));
  const id = await publish(gw.client, 'd.one', 'to the other device');
  await expectPub(other, 'd.one', id, 'to the other device');
  const marker = await subscribeAndPublish(refreshed, 'e.marker');
  assert.equal((await refreshed.next()).id, marker, 'the refreshed connection got nothing of d.one');
});

/** Follows `channel` on `client` and publishes to it; returns the publication's id. */
async function subscribeAndPublish(client: TestClient, channel: string): Promise<string> {
  await subscribe(client, channel);
  return publish(gw.client, channel, 'marker');
}
