/**
 * Broadcast across nodes (DESIGN.md §8, §9): two `pixiu serve` processes on one Redis,
 * each with its own data dir and port, the same JWT secret and API token; 1,000
 * connections of 500 users, each user's two devices on different nodes. Every
 * connection gets each broadcast it matches exactly once and no other; one connecting
 * again with `last_bseq` (to the other node) gets what it missed, in order, then live
 * ones, and nothing twice.
 *
 * "Nothing else" is bounded by events, not by time: each step ends with an unfiltered
 * marker broadcast, and frames arrive in stream order on a connection, so a broadcast
 * sent where it should not have been (or twice) would arrive before the marker.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { cleanupList, type PixiuClient, type ServeProcess } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { TestClient, testToken } from '../harness/ws-client.js';
import { JWT_KEY } from '../gateway/gateway-fixture.js';
import { bcastsUntil, expectFrame, inBatches, postBroadcast, serveBroadcasts, type Posted } from './broadcast-fixture.js';

const USERS = 500;
/** Handshakes in flight at once. */
const CONNECTING = 40;

/** One connection and what it should receive. */
interface Conn {
  readonly user: number;
  readonly device: 'a' | 'b';
  /** 0 or 1: which node it is on. */
  node: number;
  readonly tags: readonly string[];
  client: TestClient;
}

/** User u's tags: `vip` for every 5th, `beta` for every 3rd, and a language. */
function tagsOf(u: number): string[] {
  return [...(u % 5 === 0 ? ['vip'] : []), ...(u % 3 === 0 ? ['beta'] : []), u % 2 === 0 ? 'lang:fr' : 'lang:en'];
}

const cleanup = cleanupList();
let redis: RedisServer;
const nodes: ServeProcess[] = [];
const apis: PixiuClient[] = [];
const conns: Conn[] = [];

/** Opens a connection of `c` to its node (optionally resuming after `lastBseq`) and reads its welcome. */
async function open(c: Omit<Conn, 'client'>, lastBseq?: string): Promise<TestClient> {
  const token = await testToken(JWT_KEY, `user-${c.user}`, { tags: [...c.tags] });
  const client = await TestClient.connect((nodes[c.node] as ServeProcess).url, {
    token, params: { device: c.device, ...(lastBseq !== undefined ? { last_bseq: lastBseq } : {}) }, timeoutMs: 20_000,
  });
  await expectFrame(client, 'welcome');
  return client;
}

before(async () => {
  redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  const started = await Promise.all([0, 1].map(() => serveBroadcasts(cleanup, redis.url)));
  nodes.push(...started.map((n) => n.serve));
  apis.push(...started.map((n) => n.api));
  const specs: Array<Omit<Conn, 'client'>> = [];
  for (let u = 0; u < USERS; u++) {
    specs.push({ user: u, device: 'a', node: u % 2, tags: tagsOf(u) }, { user: u, device: 'b', node: (u + 1) % 2, tags: tagsOf(u) });
  }
  const clients = await inBatches(specs, CONNECTING, (spec) => open(spec));
  specs.forEach((spec, i) => conns.push({ ...spec, client: clients[i] as TestClient }));
  cleanup.after(() => Promise.all(conns.map((c) => c.client.close())));
});

after(() => cleanup.run());

/** Every connection's broadcasts up to `marker`, checked against what its tags match. */
async function expectEach(targets: readonly Conn[], marker: Posted, expected: (c: Conn) => string[]): Promise<void> {
  await inBatches(targets, targets.length, async (c) => {
    const got = await bcastsUntil(c.client, marker.bseq, 20_000);
    assert.deepEqual(got, expected(c), `user-${c.user}/${c.device} on node ${c.node} (tags ${c.tags.join(',')})`);
  });
}

const matchesAll = (c: Conn): boolean => c.tags.includes('vip') && c.tags.includes('beta');
const matchesAny = (c: Conn): boolean => c.tags.includes('vip') || c.tags.includes('beta');

test('1,000 connections on two nodes: each gets every broadcast it matches exactly once, and no other', { timeout: 90_000 }, async () => {
  assert.equal(conns.length, 2 * USERS);
  const [a, b] = apis as [PixiuClient, PixiuClient];
  const everyone = await postBroadcast(a, { data: { to: 'everyone', text: 'héllo 🌍' } });
  const both = await postBroadcast(b, { tags: { all: ['vip', 'beta'] }, data: { to: 'vip and beta' } });
  const either = await postBroadcast(a, { tags: { any: ['vip', 'beta'] }, data: { to: 'vip or beta' } });
  const marker = await postBroadcast(b, { data: { marker: 1 } });
  // The filtered audiences are what the tags say, and span both nodes.
  const allAudience = conns.filter(matchesAll);
  assert.equal(allAudience.length, 2 * 34);
  assert.ok(allAudience.some((c) => c.node === 0) && allAudience.some((c) => c.node === 1));
  await expectEach(conns, marker, (c) => [everyone.bseq, ...(matchesAll(c) ? [both.bseq] : []), ...(matchesAny(c) ? [either.bseq] : []), marker.bseq]);
  // The frame itself (DESIGN.md §6): bseq, id, type, ts, data, as posted.
  const sample = (conns[0] as Conn).client.frames.find((f) => f.bseq === everyone.bseq);
  assert.deepEqual({ ...sample, ts: typeof sample?.ts }, {
    t: 'bcast', bseq: everyone.bseq, id: everyone.id, type: 'test.news', ts: 'number', data: { to: 'everyone', text: 'héllo 🌍' },
  });
});

test('a client reconnecting with last_bseq (to the other node) gets what it missed, in order, then live, nothing twice', { timeout: 90_000 }, async () => {
  const [a, b] = apis as [PixiuClient, PixiuClient];
  const sync = await postBroadcast(a, { data: { sync: 1 } });
  await expectEach(conns, sync, () => [sync.bseq]);
  // 40 connections leave: 20 from each node, matching users among them.
  const leaving = conns.filter((c) => c.user % 25 === 0 || c.user % 25 === 3).slice(0, 40);
  assert.equal(leaving.length, 40);
  assert.ok(leaving.some(matchesAll) && leaving.some((c) => !matchesAny(c)));
  await Promise.all(leaving.map((c) => c.client.close()));
  const missed = [
    await postBroadcast(a, { data: { missed: 1 } }),
    await postBroadcast(b, { tags: { all: ['vip', 'beta'] }, data: { missed: 2 } }),
    await postBroadcast(a, { tags: { any: ['beta'] }, data: { missed: 3 } }),
    await postBroadcast(b, { data: { missed: 4 } }),
  ];
  const [m1, m2, m3, m4] = missed as [Posted, Posted, Posted, Posted];
  const missedBy = (c: Conn): string[] => [m1.bseq, ...(matchesAll(c) ? [m2.bseq] : []), ...(c.tags.includes('beta') ? [m3.bseq] : []), m4.bseq];
  // Back, each on the node it was not on, resuming after the last broadcast it had.
  await inBatches(leaving, CONNECTING, async (c) => {
    c.node = 1 - c.node;
    c.client = await open(c, sync.bseq);
  });
  const live = await postBroadcast(b, { data: { live: 1 } });
  await expectEach(leaving, live, (c) => [...missedBy(c), live.bseq]);
  // The ones that stayed got the same broadcasts live, once each.
  const stayed = conns.filter((c) => !leaving.includes(c));
  await expectEach(stayed, live, (c) => [...missedBy(c), live.bseq]);
});
