/**
 * The `subscribed` frame that answers a `sub` (docs/protocol.md "Channels"): before any
 * publication of the channel, it gives the id after which the connection receives it
 * — the channel's newest publication for a `sub` without `since` (`0-0` on a channel
 * with no history), the `since` itself otherwise — so a client that got no `pub` yet
 * can still resume with `since` after a disconnect. Every publication after that id
 * comes, once, and none at or before it, also those racing the `sub`.
 *
 * Real Redis, the real service, real WebSocket clients; publications over the HTTP API.
 * "Nothing more arrived" is checked by the next frame being a later publication (a
 * marker), never by waiting.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileRedis } from '../harness/file-redis.js';
import { expectPong, startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import type { TestClient } from '../harness/ws-client.js';
import { compareStreamIds } from '../../src/streams/stream-id.js';
import { connectWith, expectPub, expectSubscribed, pubIds, publish, subscribe } from './channel-fixture.js';

let gw: GatewayFixture;
const P = 'sd1:';

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: P, storeDurability: 'relaxed' });
});

test('a sub without since is answered subscribed with the channel\'s newest publication id, before any pub; the next publication comes with a greater id', async () => {
  const client = await connectWith(gw, 'newest', ['n.*']);
  await publish(gw.client, 'n.one', 'h1');
  const h2 = await publish(gw.client, 'n.one', 'h2');
  client.send({ t: 'sub', channel: 'n.one' });
  assert.equal(await expectSubscribed(client, 'n.one'), h2, 'the newest publication when the sub took effect');
  const live = await publish(gw.client, 'n.one', 'live');
  await expectPub(client, 'n.one', live, 'live');
  assert.ok(compareStreamIds(live, h2) > 0, `${live} comes after ${h2}`);
});

test('a channel with no history answers subscribed with since 0-0; its first publication follows', async () => {
  const client = await connectWith(gw, 'empty', ['e.*']);
  client.send({ t: 'sub', channel: 'e.none' });
  assert.equal(await expectSubscribed(client, 'e.none'), '0-0');
  const first = await publish(gw.client, 'e.none', 'first');
  await expectPub(client, 'e.none', first, 'first');
});

test('after a disconnect, sub with since = the subscribed id (no pub received yet), then with the last id processed, gets exactly what was missed, then live', async () => {
  const channel = 'r.one';
  await publish(gw.client, channel, 'before anyone followed');
  const first = await connectWith(gw, 'resumer', ['r.*']);
  first.send({ t: 'sub', channel });
  const since = await expectSubscribed(first, channel);
  first.ws.close();
  await first.closed;
  const missed = [await publish(gw.client, channel, 'm1'), await publish(gw.client, channel, 'm2')];

  const second = await connectWith(gw, 'resumer', ['r.*']);
  second.send({ t: 'sub', channel, since });
  assert.equal(await expectSubscribed(second, channel), since, 'a sub with since starts after it');
  assert.deepEqual(await pubIds(second, 2), missed, 'exactly the publications missed, in order');
  const live = await publish(gw.client, channel, 'm3');
  await expectPub(second, channel, live, 'm3');
  second.ws.close();
  await second.closed;
  const missedAgain = await publish(gw.client, channel, 'm4');

  const third = await connectWith(gw, 'resumer', ['r.*']);
  third.send({ t: 'sub', channel, since: live });
  assert.equal(await expectSubscribed(third, channel), live);
  const marker = await publish(gw.client, channel, 'marker');
  assert.deepEqual(await pubIds(third, 2), [missedAgain, marker], 'the one missed, once, then live');
});

test('a since ahead of the newest publication is answered with the newest id (taken as now); a since written with leading zeros is answered in the form pub ids take', async () => {
  const client = await connectWith(gw, 'ahead', ['a.*']);
  const newest = await publish(gw.client, 'a.one', 'h');
  client.send({ t: 'sub', channel: 'a.one', since: '99999999999999-0' });
  assert.equal(await expectSubscribed(client, 'a.one'), newest);
  const h1 = await publish(gw.client, 'a.two', 'h1');
  const h2 = await publish(gw.client, 'a.two', 'h2');
  const [ms, n] = h1.split('-');
  client.send({ t: 'sub', channel: 'a.two', since: `000${ms}-00${n}` });
  assert.equal(await expectSubscribed(client, 'a.two'), h1);
  await expectPub(client, 'a.two', h2, 'h2');
});

test('a sub of a channel already followed changes nothing and is answered subscribed with the last id sent on it', async () => {
  const client = await connectWith(gw, 'twice', ['t.*']);
  client.send({ t: 'sub', channel: 't.one' });
  assert.equal(await expectSubscribed(client, 't.one'), '0-0');
  client.send({ t: 'sub', channel: 't.one', since: '0-0' });
  assert.equal(await expectSubscribed(client, 't.one'), '0-0', 'its since is not read');
  const p1 = await publish(gw.client, 't.one', 1);
  await expectPub(client, 't.one', p1, 1);
  client.send({ t: 'sub', channel: 't.one' });
  assert.equal(await expectSubscribed(client, 't.one'), p1);
  const p2 = await publish(gw.client, 't.one', 2);
  await expectPub(client, 't.one', p2, 2);
});

/** One publication of a race round: its id, and when its POST was sent and answered (performance.now()). */
interface Published {
  readonly id: string;
  readonly sentAt: number;
  readonly doneAt: number;
}

/**
 * Publishes to `channel` from `workers` concurrent loops until stopped; {@link whenCount}
 * resolves once `n` publications were answered.
 */
function publisher(channel: string, workers = 4): { readonly published: Published[]; whenCount(n: number): Promise<void>; stop(): Promise<void> } {
  const published: Published[] = [];
  let waiters: Array<{ n: number; resolve: () => void }> = [];
  let stopped = false;
  let next = 0;
  const loop = async (): Promise<void> => {
    while (!stopped) {
      const sentAt = performance.now();
      const id = await publish(gw.client, channel, next++);
      published.push({ id, sentAt, doneAt: performance.now() });
      waiters = waiters.filter((w) => (published.length >= w.n ? (w.resolve(), false) : true));
    }
  };
  const loops = Array.from({ length: workers }, loop);
  return {
    published,
    whenCount: (n) => (published.length >= n ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve }))),
    stop: async () => {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

/**
 * One race round: `sub` (with `since` the round's first publication when `withSince`)
 * while publications are posted concurrently. The `subscribed` frame must come before
 * any `pub`, and the `pub`s then received must be exactly the publications after its
 * id, in order, each once.
 * @returns how many publications were in flight (POST sent before the `sub`, answered after it)
 */
async function raceRound(client: TestClient, channel: string, withSince: boolean): Promise<number> {
  const pubs = publisher(channel);
  let from: string;
  let subSentAt: number;
  try {
    await pubs.whenCount(3);
    const since = withSince ? pubs.published[0]?.id : undefined;
    subSentAt = performance.now();
    client.send({ t: 'sub', channel, ...(since !== undefined ? { since } : {}) });
    from = await expectSubscribed(client, channel);
    if (since !== undefined) assert.equal(from, since);
    else assert.ok(pubs.published.some((p) => p.id === from), `subscribed since ${from} is a publication of the round`);
    await pubs.whenCount(pubs.published.length + 3);
  } finally {
    await pubs.stop();
  }
  const marker = await publish(gw.client, channel, 'end');
  const received: string[] = [];
  for (;;) {
    const f = await client.next();
    assert.deepEqual([f.t, f.channel], ['pub', channel], JSON.stringify(f));
    if (f.id === marker) break;
    received.push(f.id as string);
  }
  const expected = pubs.published.map((p) => p.id).filter((id) => compareStreamIds(id, from) > 0).sort(compareStreamIds);
  assert.deepEqual(received, expected, `after subscribed since ${from}: each later publication once, none before`);
  client.send({ t: 'unsub', channel });
  await expectPong(client);
  return pubs.published.filter((p) => p.sentAt < subSentAt && p.doneAt > subSentAt).length;
}

test('publications racing a sub are delivered exactly once, consistent with subscribed: first subscriber of a channel, a channel the node already follows, and sub with since', async (t) => {
  const ROUNDS = 40;
  /** Rounds per connection: each round sends 3 frames other than ack, at most 300 in 30 s (docs/protocol.md). */
  const ROUNDS_PER_CONNECTION = 20;
  // Keeps the node subscribed to race.hot, so the racer's sub there joins at once and
  // publications reach it while its position is still being read.
  const holder = await connectWith(gw, 'holder', ['race.*']);
  await subscribe(holder, 'race.hot');
  let client: TestClient | undefined;
  let racing = 0;
  for (let i = 0; i < ROUNDS; i++) {
    if (i % ROUNDS_PER_CONNECTION === 0) {
      client?.ws.close();
      await client?.closed;
      client = await connectWith(gw, 'racer', ['race.*']);
    }
    const racer = client as TestClient;
    racing += await raceRound(racer, `race.fresh${i}`, false);
    racing += await raceRound(racer, 'race.hot', false);
    racing += await raceRound(racer, 'race.hot', true);
  }
  t.diagnostic(`${racing} publications were in flight while a sub was sent, over ${3 * ROUNDS} rounds`);
  assert.ok(racing > 0, 'the rounds did race publications against the sub');
});
