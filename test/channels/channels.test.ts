/**
 * Channels end to end (DESIGN.md §6, §8): live, at-most-once publications to the
 * clients that `sub`scribed, allowed by the JWT's `channels` patterns; a node holds a
 * Redis Pub/Sub subscription exactly while it has local subscribers; `sub` with
 * `since` catches up from the capped history, then goes live, sending nothing twice.
 * Real Redis, the real service, real WebSocket clients. "Nothing more arrived" is
 * checked by the next frame being a later publication on another channel, never by
 * waiting; the node's Pub/Sub state is read from Redis with a bounded poll.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { SignJWT } from 'jose';
import { openInbox, waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { JWT_KEY, JWT_SECRET, expectPong, startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { testToken } from '../harness/ws-client.js';
import {
  connectWith, expectErrorFrame, expectPub, expectSubscribed, pubIds, publish, publishMany, subscribe, waitTopics,
} from './channel-fixture.js';

let gw: GatewayFixture;
/** A service keeping 3 publications per channel. */
let short: GatewayFixture;
/** The test's own Redis connection, to read PUBSUB state and keys. */
let probe: Redis;
const P = 'ch1:';
const SHORT = 'ch2:';
/** A service keeping a channel's history 1 s after its last publication. */
let fading: GatewayFixture;
const FADING = 'ch3:';

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: P, storeDurability: 'relaxed' });
  short = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: SHORT, storeDurability: 'relaxed', channelHistory: '3' });
  fading = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: FADING, storeDurability: 'relaxed', channelHistoryTtlMs: '1000' });
  probe = (await openInbox(cleanup, redis.url)).redis;
});

test('subscribe, publish, receive: the pub frame carries channel, id, type, ts and data', async () => {
  const client = await connectWith(gw, 'viewer', ['live.*.chat']);
  await subscribe(client, 'live.s1.chat');
  const before = Date.now();
  const data = { text: 'héllo 👋', n: [1, 2, { deep: null }] };
  const id = await publish(gw.client, 'live.s1.chat', data);
  const f = await expectPub(client, 'live.s1.chat', id, data);
  assert.ok((f.ts as number) >= before - 1000 && (f.ts as number) <= Date.now() + 1000, 'ts is the publish time, ms');
  const id2 = await publish(gw.client, 'live.s1.chat', 'second', 'chat.other');
  await expectPub(client, 'live.s1.chat', id2, 'second', 'chat.other');
  assert.ok(id2 > id || id2.length > id.length, 'ids increase');
});

test('unsubscribe stops publications; the other channels of the connection keep flowing', async () => {
  const client = await connectWith(gw, 'quitter', ['q.*']);
  await subscribe(client, 'q.one');
  await subscribe(client, 'q.two');
  const first = await publish(gw.client, 'q.one', 1);
  await expectPub(client, 'q.one', first, 1);

  client.send({ t: 'unsub', channel: 'q.one' });
  client.send({ t: 'ping' });
  assert.deepEqual(await client.next(), { t: 'pong' });
  await publish(gw.client, 'q.one', 'after unsub');
  const marker = await publish(gw.client, 'q.two', 'marker');
  await expectPub(client, 'q.two', marker, 'marker');
  // Unsubscribing again, or from a channel never followed, is a no-op.
  client.send({ t: 'unsub', channel: 'q.one' });
  client.send({ t: 'unsub', channel: 'q.never' });
  client.send({ t: 'ping' });
  assert.deepEqual(await client.next(), { t: 'pong' });
});

test('a channel no pattern allows is FORBIDDEN, a bad name INVALID_REQUEST; the connection stays healthy', async () => {
  const client = await connectWith(gw, 'limited', ['sports.*', 'news']);
  const refusals: Array<{ channel: string; code: string; message: RegExp }> = [
    { channel: 'weather', code: 'FORBIDDEN', message: /does not allow channel weather/ },
    { channel: 'news.local', code: 'FORBIDDEN', message: /news\.local/ },
    { channel: 'sports', code: 'FORBIDDEN', message: /sports/ },
    { channel: 'sports.a.b', code: 'FORBIDDEN', message: /sports\.a\.b/ },
    { channel: 'sports.*', code: 'INVALID_REQUEST', message: /not a channel name/ },
    { channel: 'has space', code: 'INVALID_REQUEST', message: /not a channel name/ },
    { channel: 'a..b', code: 'INVALID_REQUEST', message: /not a channel name/ },
    { channel: '.lead', code: 'INVALID_REQUEST', message: /not a channel name/ },
    { channel: 'x'.repeat(129), code: 'INVALID_REQUEST', message: /1-128 characters/ },
  ];
  for (const r of refusals) {
    client.send({ t: 'sub', channel: r.channel });
    await expectErrorFrame(client, r.code, r.message);
  }
  await waitTopics(probe, P, Object.fromEntries(refusals.map((r) => [r.channel, false])));
  // The refusals left nothing behind: an allowed channel works as ever.
  await subscribe(client, 'news');
  const id = await publish(gw.client, 'news', 'ok');
  await expectPub(client, 'news', id, 'ok');
  client.send({ t: 'unsub', channel: 'news' });
  await waitTopics(probe, P, { news: false });
});

test('a token without a channels claim may follow no channel, and the refusal says the claim is missing; one with an empty claim gets the plain refusal', async () => {
  const { client } = await gw.connectWelcomed('claimless');
  client.send({ t: 'sub', channel: 'news' });
  const f = await expectErrorFrame(client, 'FORBIDDEN');
  assert.deepEqual(f, {
    t: 'error', code: 'FORBIDDEN', ref: { t: 'sub', channel: 'news' },
    message: 'the token does not allow channel news (the token has no channels claim: mint it with channels patterns, docs/protocol.md "Channels")',
  });
  // A claim that is there but allows nothing (`[]`, or patterns that do not match) is no missing claim.
  const exp = Math.floor(Date.now() / 1000) + 3600;
  const secret = new TextEncoder().encode(JWT_SECRET);
  const empty = await new SignJWT({ channels: [] }).setProtectedHeader({ alg: 'HS256' }).setSubject('claim-empty').setExpirationTime(exp).sign(secret);
  for (const other of [(await gw.connectWelcomed('claim-empty', { token: empty })).client, await connectWith(gw, 'claim-other', ['sports.*'])]) {
    other.send({ t: 'sub', channel: 'news' });
    const plain = await expectErrorFrame(other, 'FORBIDDEN');
    assert.equal(plain.message, 'the token does not allow channel news');
  }
});

test('patterns: * matches exactly one whole segment, anywhere; literal segments match exactly', async () => {
  const client = await connectWith(gw, 'matcher', ['*', 'a.*.c', '*.tail', 'exact.name']);
  // `*` alone allows every one-segment name, `exact` included.
  const allowed = ['solo', 'exact', 'a.b.c', 'a.xyz.c', 'head.tail', 'exact.name'];
  const refused = ['a.c', 'a.b.b.c', 'a.b.cc', 'b.b.c', 'head.mid.tail', 'exact.name.more', 'Exact.name', 'x.y'];
  for (const channel of refused) {
    client.send({ t: 'sub', channel });
    await expectErrorFrame(client, 'FORBIDDEN');
  }
  for (const channel of allowed) await subscribe(client, channel);
  for (const channel of allowed) {
    const id = await publish(gw.client, channel, channel);
    await expectPub(client, channel, id, channel);
  }
  for (const channel of allowed) client.send({ t: 'unsub', channel });
  await waitTopics(probe, P, Object.fromEntries([...allowed, ...refused].map((c) => [c, false])));
});

test('the node holds a Pub/Sub subscription exactly while it has a local subscriber; two subscribers, one leaves, the other still receives', async () => {
  const a = await connectWith(gw, 'sub-a', ['room.*']);
  const b = await connectWith(gw, 'sub-b', ['room.*']);
  await waitTopics(probe, P, { 'room.x': false });
  await subscribe(a, 'room.x');
  await subscribe(b, 'room.x');
  await waitTopics(probe, P, { 'room.x': true });
  const both = await publish(gw.client, 'room.x', 'both');
  await expectPub(a, 'room.x', both, 'both');
  await expectPub(b, 'room.x', both, 'both');

  a.send({ t: 'unsub', channel: 'room.x' });
  a.send({ t: 'ping' });
  assert.deepEqual(await a.next(), { t: 'pong' });
  await waitTopics(probe, P, { 'room.x': true });
  const onlyB = await publish(gw.client, 'room.x', 'only b');
  await expectPub(b, 'room.x', onlyB, 'only b');

  // The last local subscriber leaving by closing its connection drops the subscription.
  await b.close();
  await waitTopics(probe, P, { 'room.x': false });
  // A later subscriber brings it back.
  await subscribe(a, 'room.x');
  const again = await publish(gw.client, 'room.x', 'again');
  await expectPub(a, 'room.x', again, 'again');
  await a.close();
  await waitTopics(probe, P, { 'room.x': false });
});

test('sub and unsub sent back to back, or a close right after sub, leave no Pub/Sub subscription behind', async () => {
  const client = await connectWith(gw, 'flicker', ['f.*']);
  for (let i = 0; i < 5; i++) {
    client.send({ t: 'sub', channel: `f.${i}` });
    client.send({ t: 'unsub', channel: `f.${i}` });
  }
  // Subscribed, unsubscribed and subscribed again before Redis answered: it stays.
  client.send({ t: 'sub', channel: 'f.keep' });
  client.send({ t: 'unsub', channel: 'f.keep' });
  client.send({ t: 'sub', channel: 'f.keep' });
  // Each sub is answered, in the order sent.
  for (const channel of ['f.0', 'f.1', 'f.2', 'f.3', 'f.4', 'f.keep', 'f.keep']) await expectSubscribed(client, channel);
  const flickered = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`f.${i}`, false]));
  await waitTopics(probe, P, { ...flickered, 'f.keep': true });
  const id = await publish(gw.client, 'f.keep', 'kept');
  await expectPub(client, 'f.keep', id, 'kept');

  const closer = await connectWith(gw, 'closer', ['g.*']);
  closer.send({ t: 'sub', channel: 'g.gone' });
  await closer.close();
  await client.close();
  await waitTopics(probe, P, { ...flickered, 'f.keep': false, 'g.gone': false });
});

test('sub with since catches up from the history, then goes live, nothing twice', async () => {
  const channel = 'cu.feed';
  const ids = await publishMany(gw.client, channel, 5);
  const client = await connectWith(gw, 'catcher', ['cu.*']);
  await subscribe(client, 'cu.other');
  assert.equal(await subscribe(client, channel, ids[1]), ids[1], 'subscribed gives the since it starts after');
  for (let i = 3; i <= 5; i++) await expectPub(client, channel, ids[i - 1] as string, i);
  const live = await publish(gw.client, channel, 6);
  await expectPub(client, channel, live, 6);
  const marker = await publish(gw.client, 'cu.other', 'marker');
  await expectPub(client, 'cu.other', marker, 'marker');

  // since = the newest: nothing old, then live.
  const late = await connectWith(gw, 'catcher2', ['cu.*']);
  assert.equal(await subscribe(late, channel, live), live);
  const seven = await publish(gw.client, channel, 7);
  await expectPub(late, channel, seven, 7);
  // since before everything (0-0): the whole retained history, in order.
  const all = await connectWith(gw, 'catcher3', ['cu.*']);
  assert.equal(await subscribe(all, channel, '0-0'), '0-0');
  assert.deepEqual(await pubIds(all, 7), [...ids, live, seven]);
});

test('a since written with leading zeros is the same id: the history after it, then live', async () => {
  const channel = 'cu.zeros';
  const ids = await publishMany(gw.client, channel, 3);
  const [ms, seq] = (ids[0] as string).split('-');
  const client = await connectWith(gw, 'zeros', ['cu.*']);
  assert.equal(await subscribe(client, channel, `00${ms}-000${seq}`), ids[0], 'subscribed gives it without the zeros');
  await expectPub(client, channel, ids[1] as string, 2);
  await expectPub(client, channel, ids[2] as string, 3);
  const live = await publish(gw.client, channel, 4);
  await expectPub(client, channel, live, 4);
});

test('acks sent while a sub waits on Redis are applied at once and never count towards the 64 frames held: a client acking its backlog while it subscribes stays open', async () => {
  const channel = 'ack.feed';
  const ids = await publishMany(gw.client, channel, 3);
  const seqs = await gw.post('acker', 100);
  const token = await testToken(JWT_KEY, 'acker', { channels: ['ack.*'] });
  const { client } = await gw.connectWelcomed('acker', { token, device: 'd1' });
  const backlog = await client.msgs(100);
  // The sub waits on Redis (its catch-up's read) while the 100 acks sent right behind
  // it arrive, in the same read of the socket.
  client.send({ t: 'sub', channel, since: '0-0' });
  for (const m of backlog) client.ack(m.seq as number);
  await expectSubscribed(client, channel);
  assert.deepEqual(await pubIds(client, 3), ids);
  await expectPong(client);
  assert.equal(await client.receivesWithin(200), false, 'no error frame, no close');
  await waitUntil('the last ack is the stored cursor', async () => (await probe.hget(`${P}{acker}:acks`, 'd1')) === String(seqs.at(-1)), 5000, 20);
});

test('a since ahead of the channel\'s newest publication is taken as now: no history, live publications follow', async () => {
  const channel = 'fut.feed';
  const old = await publish(gw.client, channel, 'old');
  const ahead = [
    '9999999999999-0', '9007199254740993-0', '18446744073709551615-0',
    // The largest id, both parts 2^64-1: valid, and ahead of everything.
    '18446744073709551615-18446744073709551615',
  ];
  const clients = [];
  for (const [i, since] of ahead.entries()) {
    const client = await connectWith(gw, `future${i}`, ['fut.*']);
    assert.equal(await subscribe(client, channel, since), old, 'starts after the newest publication');
    clients.push(client);
  }
  const live = await publish(gw.client, channel, 'live');
  for (const client of clients) await expectPub(client, channel, live, 'live');
  // A channel with no history at all: any since is ahead of it.
  const empty = 'fut.empty';
  const client = await connectWith(gw, 'future-empty', ['fut.*']);
  assert.equal(await subscribe(client, empty, '5-0'), '0-0', 'starts at the beginning of a channel with no history');
  const first = await publish(gw.client, empty, 'first');
  await expectPub(client, empty, first, 'first');
});

test('publications during a catch-up arrive once each, in order, with none lost', async () => {
  const channel = 'race.feed';
  const first = await publish(gw.client, channel, 0);
  const client = await connectWith(gw, 'racer', ['race.*']);
  const rounds = 30;
  client.send({ t: 'sub', channel, since: first });
  const published = await publishMany(gw.client, channel, rounds);
  assert.equal(await expectSubscribed(client, channel), first);
  // Some of these were read by the catch-up, some arrived live: together, each once.
  assert.deepEqual(await pubIds(client, rounds), published);
  const marker = await publish(gw.client, channel, 'end');
  await expectPub(client, channel, marker, 'end');
});

test('the history keeps the newest channelHistory publications: since older than that gets a gap, then catches up from the oldest kept', async () => {
  const channel = 'capped';
  const ids = await publishMany(short.client, channel, 6);
  assert.equal(await probe.xlen(`${SHORT}ch:{${channel}}:history`), 3, 'trimmed to exactly 3');
  const client = await connectWith(short, 'hist', ['capped']);
  assert.equal(await subscribe(client, channel, ids[0]), ids[0]);
  // 2 and 3 are gone (more in trimmed-gap.test.ts).
  assert.deepEqual(await client.next(), { t: 'gap', stream: 'channel', channel, from: ids[0], to: ids[3] });
  for (let i = 4; i <= 6; i++) await expectPub(client, channel, ids[i - 1] as string, i);
  const live = await publish(short.client, channel, 7);
  await expectPub(client, channel, live, 7);
});

test('a channel\'s history is dropped channelHistoryTtl after its last publication (a day by default); each publication keeps it longer', async () => {
  const before = Date.now();
  await publish(gw.client, 'day.kept', 1);
  const day = await probe.pexpiretime(`${P}ch:{day.kept}:history`);
  assert.ok(day >= before + 86_400_000 && day <= Date.now() + 86_400_000, `expires at ${day}`);

  const channel = 'fading';
  const key = `${FADING}ch:{${channel}}:history`;
  const first = await publish(fading.client, channel, 1);
  const firstExpiry = await probe.pexpiretime(key);
  // A step of the clock, no event: the second publication's expiry must be a later ms (50 ms is 50 of them).
  await new Promise((resolve) => setTimeout(resolve, 50));
  await publish(fading.client, channel, 2);
  assert.ok(await probe.pexpiretime(key) > firstExpiry, 'moved by the second publication');
  await waitUntil('the history expired (1 s after the second publication)', async () => await probe.exists(key) === 0, 10_000);
  // Gone: a sub since the first publication catches up nothing (taken as now, from the
  // start of a channel with no history), then gets what is live.
  const client = await connectWith(fading, 'after-ttl', ['fading']);
  assert.equal(await subscribe(client, channel, first), '0-0');
  const live = await publish(fading.client, channel, 3);
  await expectPub(client, channel, live, 3);
});

test('publishing with no subscribers is 201 and kept in the history', async () => {
  const channel = 'empty.room';
  const id = await publish(gw.client, channel, { alone: true });
  await waitTopics(probe, P, { [channel]: false });
  const client = await connectWith(gw, 'latecomer', ['empty.*']);
  await subscribe(client, channel, '0-0');
  await expectPub(client, channel, id, { alone: true });
});

test('the same channel named twice by one connection is followed once', async () => {
  const client = await connectWith(gw, 'twice', ['dup']);
  await subscribe(client, 'dup');
  await subscribe(client, 'dup');
  const one = await publish(gw.client, 'dup', 1);
  const two = await publish(gw.client, 'dup', 2);
  assert.deepEqual(await pubIds(client, 2), [one, two]);
});

test('at most 100 channels per connection: the 100th is followed, the 101st is RATE_LIMITED, and an unsub makes room', async () => {
  const client = await connectWith(gw, 'hundred', ['many.*']);
  // In batches below the 64 frames a connection may have held (docs/protocol.md).
  for (let start = 0; start < 99; start += 20) {
    const batch = Array.from({ length: Math.min(20, 99 - start) }, (_, k) => `many.c${start + k}`);
    for (const channel of batch) client.send({ t: 'sub', channel });
    for (const channel of batch) await expectSubscribed(client, channel);
  }
  // The 100th: still within the limit, so followed (answered subscribed).
  await subscribe(client, 'many.c99');
  client.send({ t: 'sub', channel: 'many.c100' });
  await expectErrorFrame(client, 'RATE_LIMITED', /100 channels/);
  // The refused one follows nothing; the 100 followed still flow.
  await publish(gw.client, 'many.c100', 'refused');
  const kept = await publish(gw.client, 'many.c99', 'kept');
  assert.deepEqual(await pubIds(client, 1), [kept]);
  // Leaving one makes room for another.
  client.send({ t: 'unsub', channel: 'many.c0' });
  await subscribe(client, 'many.c100');
  const now = await publish(gw.client, 'many.c100', 'room');
  assert.deepEqual(await pubIds(client, 1), [now]);
});
