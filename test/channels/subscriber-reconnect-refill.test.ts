/**
 * docs/protocol.md ("Channels"): what the channel's history no longer holds is gone,
 * told with a `gap` in its place — and only that. Publications made while the node's subscriber
 * connection is down (a network partition between it and Redis, Redis cutting it at
 * its Pub/Sub output-buffer limit) reach the node on no connection, though the history
 * keeps them and their producers got 201. They were lost (a reviewer's C2); the node
 * now refills every channel it follows from the history once its subscriber is back,
 * each connection from the last publication it was sent, in order and once each; those
 * the history trimmed before the refill read them come as a `gap {stream: "channel"}`
 * from the last one each connection was sent to the first retained (they were skipped
 * without a signal: an evaluator's finding).
 *
 * The subscriber connection (and only it: the command connection stays up) is cut by
 * test/harness/lag-proxy.ts while the publications are made, and let back after.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { TestClient } from '../harness/ws-client.js';
import { connectWith, followThenCut, publish, publishMany, subscribe, waitTopics } from './channel-fixture.js';
import { subscriberProxyForFile } from './subscriber-proxy.js';
import { waitUntil } from '../harness/checks.js';

const service = subscriberProxyForFile(3);

/** Publishes `during` with the node's subscriber connection cut, then lets it back and waits until it follows `channel` again. */
async function publishWhileCut(channel: string, during: readonly string[]): Promise<string[]> {
  const { gw, proxy, probe } = service();
  proxy.cut(true);
  await waitTopics(probe, 'px:', { [channel]: false });
  const ids: string[] = [];
  for (const data of during) ids.push(await publish(gw.client, channel, data));
  proxy.cut(false);
  await waitTopics(probe, 'px:', { [channel]: true });
  return ids;
}

/** Publishes one more on `channel`: it is the next frame each client gets (nothing else was on its way). */
async function expectNextLive(channel: string, clients: readonly TestClient[]): Promise<void> {
  const id = await publish(service().gw.client, channel, 'after');
  for (const client of clients) assert.deepEqual(await pubsUpTo(client, id), ['after']);
}

/** The `pub` data a client gets up to the one with `lastId`; any other frame fails. */
async function pubsUpTo(client: TestClient, lastId: string): Promise<string[]> {
  const got: string[] = [];
  for (;;) {
    const f = await client.next(10_000);
    assert.equal(f.t, 'pub', JSON.stringify(f));
    got.push(f.data as string);
    if (f.id === lastId) return got;
  }
}

test('publications made while the node\'s subscriber connection was down arrive once it is back, in order', { timeout: 30_000 }, async () => {
  const { gw } = service();
  const client = await connectWith(gw, 'viewer', ['r.*']);
  await subscribe(client, 'r.a');
  const before = await publish(gw.client, 'r.a', 'before');
  assert.equal((await client.next()).id, before);
  const during = await publishWhileCut('r.a', ['d1', 'd2', 'd3']);
  assert.deepEqual(await pubsUpTo(client, during.at(-1) as string), ['d1', 'd2', 'd3']);
  await expectNextLive('r.a', [client]);
});

test('after the reconnect every connection following the channel gets them once each, and what the history no longer holds is told as a gap in its place', { timeout: 30_000 }, async () => {
  const { gw } = service();
  const ahead = await connectWith(gw, 'ahead', ['r.*']);
  const behind = await connectWith(gw, 'behind', ['r.*']);
  await subscribe(ahead, 'r.b');
  const first = await publish(gw.client, 'r.b', 'first');
  assert.equal((await ahead.next()).id, first);
  // `behind` starts after `first`: the refill reads from the earliest of the two.
  const since = await subscribe(behind, 'r.b');
  assert.equal(since, first);
  // Five while cut: the history (cap 3) keeps d3..d5; d1 and d2 are gone.
  const during = await publishWhileCut('r.b', ['d1', 'd2', 'd3', 'd4', 'd5']);
  const last = during.at(-1) as string;
  for (const client of [ahead, behind]) {
    assert.deepEqual(await client.next(10_000), { t: 'gap', stream: 'channel', channel: 'r.b', from: first, to: during[2] }, 'd1 and d2, in their place');
    assert.deepEqual(await pubsUpTo(client, last), ['d3', 'd4', 'd5']);
  }
  await expectNextLive('r.b', [ahead, behind]);
});

/**
 * `early` follows `channel` from `first`; the subscriber connection is cut, d1 and d2
 * published, then `late` subscribes (at d2, the newest: the two are at different
 * positions), `then` is published, and the connection let back.
 */
async function subscribeLateWhileCut(channel: string, then: readonly string[]): Promise<{ early: TestClient; late: TestClient; first: string; during: string[]; after: string[] }> {
  const { gw, proxy, probe } = service();
  const early = await connectWith(gw, 'early', ['r.*']);
  const late = await connectWith(gw, 'late', ['r.*']);
  await subscribe(early, channel);
  const first = await publish(gw.client, channel, 'first');
  assert.equal((await early.next()).id, first);
  proxy.cut(true);
  await waitTopics(probe, 'px:', { [channel]: false });
  const during = [await publish(gw.client, channel, 'd1'), await publish(gw.client, channel, 'd2')];
  assert.equal(await subscribe(late, channel), during[1]);
  const after: string[] = [];
  for (const data of then) after.push(await publish(gw.client, channel, data));
  proxy.cut(false);
  await waitTopics(probe, 'px:', { [channel]: true });
  return { early, late, first, during, after };
}

test('a connection that subscribes while the subscriber connection is down starts at the newest; one following from before still gets what was published meanwhile (the refill reads from the earliest position)', { timeout: 30_000 }, async () => {
  const { early, late, during } = await subscribeLateWhileCut('r.c', []);
  assert.deepEqual(await pubsUpTo(early, during[1] as string), ['d1', 'd2']);
  await expectNextLive('r.c', [early, late]);
});

test('a refill that finds publications trimmed sends the gap only to a connection that had not got past them: one that subscribed after them gets none', { timeout: 30_000 }, async () => {
  // Three more after `late` subscribed (at d2): the history (cap 3) keeps d3..d5 only,
  // and all it trimmed (first, d1, d2) is behind `late`.
  const { early, late, first, after } = await subscribeLateWhileCut('r.d', ['d3', 'd4', 'd5']);
  assert.deepEqual(await early.next(10_000), { t: 'gap', stream: 'channel', channel: 'r.d', from: first, to: after[0] }, 'd1 and d2, in their place');
  // pubsUpTo fails on any frame but a pub: `late` gets no gap.
  for (const client of [early, late]) assert.deepEqual(await pubsUpTo(client, after[2] as string), ['d3', 'd4', 'd5']);
  await expectNextLive('r.d', [early, late]);
});

/** How late the proxy makes what Redis sends the node's subscriber connection: under the 2 s command timeout. */
const LAG_MS = 1200;

test('a burst published while the refill runs and trimmed before its page was read is no loss: the refill waits for its live copies (a barrier) and tells only what was really lost', { timeout: 30_000 }, async () => {
  const { gw, proxy, probe } = service();
  const { client, first } = await followThenCut(gw, 'racer', 'r.e', (on) => proxy.cut(on), probe);
  await publish(gw.client, 'r.e', 'lost'); // while cut, and trimmed by the burst below
  // From here everything Redis sends the subscriber connection comes LAG_MS late: the
  // answer to its re-subscribe, then to the refill's first barrier (a PING, which the
  // refill sends once that answer came, and whose answer comes LAG_MS after Redis took
  // it: then the refill reads its page).
  proxy.lag(LAG_MS);
  try {
    proxy.cut(false);
    await waitTopics(probe, 'px:', { 'r.e': true });
    // Redis has taken the barrier's PING (the subscriber connection's last command).
    await waitUntil('the refill\'s first barrier reached Redis', async () =>
      (await probe.client('LIST') as string).split('\n').some((l) => l.includes(' name=pixiu:bus:') && l.includes(' cmd=ping')), 10_000, 10);
    // Six, past the history's cap of 3, now: their live copies come after that PING's
    // answer, later than the page that finds them trimmed (read up to LAG_MS from now).
    const burst = await publishMany(gw.client, 'r.e', 6, (i) => `b${i}`);
    assert.deepEqual(await client.next(10_000), { t: 'gap', stream: 'channel', channel: 'r.e', from: first, to: burst[0] }, '`lost` only, not b1 – b3');
    assert.deepEqual(await pubsUpTo(client, burst[5] as string), ['b1', 'b2', 'b3', 'b4', 'b5', 'b6']);
  } finally {
    proxy.lag(0);
  }
  await proxy.settled();
  await expectNextLive('r.e', [client]);
});
