/**
 * What the channel tests share (DESIGN.md §6, §8): a service whose clients carry a
 * `channels` claim, publications over the real HTTP API, the node's Redis Pub/Sub
 * subscriptions read from the test's own Redis connection (`PUBSUB CHANNELS`,
 * `PUBSUB NUMSUB`), and `subscribed` / `pub` / `error` frames read with every field
 * asserted.
 *
 * A `sub` that follows is answered `subscribed` (docs/protocol.md "Channels"), sent
 * once the node's Pub/Sub subscription is in place: every publication after its
 * `since` reaches the connection, so a test that must know a subscription is live
 * waits for that frame.
 */
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import { waitUntil } from '../harness/checks.js';
import type { PixiuClient } from '../harness/pixiu-server.js';
import { testToken, type Frame, type TestClient } from '../harness/ws-client.js';
import { JWT_KEY, expectPong, type GatewayFixture } from '../gateway/gateway-fixture.js';

/** The channel's Pub/Sub topic under the service's key prefix. */
export function topicOf(prefix: string, channel: string): string {
  return new Keys(prefix).channelTopic(channel);
}

/** How many subscribers (nodes: a node counts once) Redis has for each channel's topic. */
export async function numsub(redis: Redis, prefix: string, channels: readonly string[]): Promise<Record<string, number>> {
  const reply = (await redis.pubsub('NUMSUB', ...channels.map((c) => topicOf(prefix, c)))) as Array<string | number>;
  return Object.fromEntries(channels.map((c, i) => [c, Number(reply[2 * i + 1])]));
}

/**
 * Waits (bounded poll) until Redis has a subscription to each channel's topic exactly
 * where `want` says true (`{ 'room.x': true, 'room.y': false }`).
 */
export async function waitTopics(redis: Redis, prefix: string, want: Record<string, boolean>): Promise<void> {
  const channels = Object.keys(want);
  let seen: Record<string, number> = {};
  try {
    await waitUntil(`topics ${JSON.stringify(want)}`, async () => {
      seen = await numsub(redis, prefix, channels);
      return channels.every((c) => (seen[c] ?? 0) > 0 === want[c]);
    }, 5000, 20);
  } catch (err) {
    assert.fail(`${(err as Error).message}; NUMSUB: ${JSON.stringify(seen)}`);
  }
}

/** Connects `user` with a `channels` claim and reads the welcome. */
export async function connectWith(gw: GatewayFixture, user: string, channels: readonly string[]): Promise<TestClient> {
  const token = await testToken(JWT_KEY, user, { channels: [...channels] });
  return (await gw.connectWelcomed(user, { token, params: { from: 'latest' } })).client;
}

/**
 * Reads the next frame and asserts it is exactly the `subscribed` answer to a `sub` of
 * `channel`; returns its `since` (a publication id, or `0-0`).
 */
export async function expectSubscribed(client: TestClient, channel: string): Promise<string> {
  const f = await client.next();
  assert.equal(typeof f.since, 'string', JSON.stringify(f));
  assert.deepEqual(f, { t: 'subscribed', channel, since: f.since }, `expected subscribed after sub ${channel}`);
  assert.match(f.since as string, /^\d+-\d+$/, 'a stream entry ID');
  return f.since as string;
}

/**
 * Sends `sub` and waits until it is live: its `subscribed` answer (any other frame
 * first fails). A catch-up of `since` follows it, for the caller to read.
 * @returns the `subscribed` frame's `since`
 */
export async function subscribe(client: TestClient, channel: string, since?: string): Promise<string> {
  client.send({ t: 'sub', channel, ...(since !== undefined ? { since } : {}) });
  return expectSubscribed(client, channel);
}

/** `POST /v1/channels/{channel}/publish` → 201; returns the publication id. */
export async function publish(client: PixiuClient, channel: string, data: unknown, type = 'chat.line'): Promise<string> {
  const answer = await client.post(`/v1/channels/${encodeURIComponent(channel)}/publish`, { type, data });
  assert.equal(answer.status, 201, answer.text);
  const { id } = answer.body as { id: string };
  assert.match(id, /^\d+-\d+$/, 'a stream entry ID');
  return id;
}

/**
 * Publishes `n` publications on `channel`, one after another (each answered 201 before
 * the next), their data `dataOf(i)` for i = 1..n (the number itself by default).
 * @returns their ids, oldest first
 */
export async function publishMany(client: PixiuClient, channel: string, n: number, dataOf: (i: number) => unknown = (i) => i): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 1; i <= n; i++) ids.push(await publish(client, channel, dataOf(i)));
  return ids;
}

/** Reads the next frame and asserts it is exactly the publication `id` on `channel`. */
export async function expectPub(client: TestClient, channel: string, id: string, data: unknown, type = 'chat.line'): Promise<Frame> {
  const f = await client.next();
  assert.equal(typeof f.ts, 'number', JSON.stringify(f));
  assert.deepEqual(f, { t: 'pub', channel, id, type, ts: f.ts, data });
  return f;
}

/** Reads `n` frames that must all be `pub`; returns their ids. */
export async function pubIds(client: TestClient, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const f = await client.next();
    assert.equal(f.t, 'pub', `frame ${i}: ${JSON.stringify(f)}`);
    ids.push(f.id as string);
  }
  return ids;
}

/** Reads the next frame and asserts it is an `error` with `code` (and a message matching `message`); then the connection still answers a ping. */
export async function expectErrorFrame(client: TestClient, code: string, message?: RegExp): Promise<Frame> {
  const f = await client.next();
  assert.equal(f.t, 'error', JSON.stringify(f));
  assert.equal(f.code, code, JSON.stringify(f));
  assert.equal(typeof f.message, 'string');
  if (message !== undefined) assert.match(f.message as string, message);
  await expectPong(client);
  return f;
}

/**
 * Connects `user` (allowed `r.*`), subscribes to `channel`, publishes `first` on it and
 * reads that `pub`, then cuts the node's subscriber connection (`cut`, a LagProxy's) and
 * waits until Redis has dropped the node's subscription: the client is at `first`, and
 * what is published next reaches the node on no connection.
 */
export async function followThenCut(gw: GatewayFixture, user: string, channel: string, cut: (on: boolean) => void, probe: Redis): Promise<{ client: TestClient; first: string }> {
  const client = await connectWith(gw, user, ['r.*']);
  await subscribe(client, channel);
  const first = await publish(gw.client, channel, 'first');
  assert.equal((await client.next()).id, first);
  cut(true);
  await waitTopics(probe, 'px:', { [channel]: false });
  return { client, first };
}
