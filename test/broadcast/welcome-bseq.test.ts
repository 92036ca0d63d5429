/**
 * `welcome`'s `bseq` (docs/protocol.md "Broadcasts"): a connection without
 * `last_bseq` is told where its broadcast feed starts, so a fresh device has a
 * position to keep before its first `bcast` (a Python SDK written from the docs had
 * none: dropped then, it lost what was broadcast while it was away, with no `gap`).
 * Every broadcast after it that matches the token's tags comes on the connection,
 * none at or before it does, and a reconnect with it as `last_bseq` gets exactly the
 * ones the connection did not get — none it had, none older.
 *
 * Over real WebSockets against the service in this process, on a private redis-server.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { testToken, type TestClient } from '../harness/ws-client.js';
import { JWT_KEY, startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { compareStreamIds } from '../../src/streams/stream-id.js';
import { bcastsUntil, expectFrame, getsOnly, postBroadcast, type Posted } from './broadcast-fixture.js';

const cleanup = cleanupList();
let redis: RedisServer;
let gw: GatewayFixture;

before(async () => {
  redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed' });
});

after(() => cleanup.run());

/** Connects `user` (with `last_bseq` when given, with `tags` in its token) and returns it with its welcome. */
async function connect(user: string, opts: { lastBseq?: string; tags?: string[] } = {}): Promise<{ client: TestClient; bseq: unknown }> {
  const token = await testToken(JWT_KEY, user, opts.tags ? { tags: opts.tags } : {});
  const client = await gw.connect(user, { token, ...(opts.lastBseq !== undefined ? { params: { last_bseq: opts.lastBseq } } : {}) });
  const welcome = await expectFrame(client, 'welcome');
  return { client, bseq: welcome.bseq };
}

/** Posts `n` broadcasts with `body` on top; resolves with them in order. */
async function postMany(n: number, body: Record<string, unknown> = {}): Promise<Posted[]> {
  const out: Posted[] = [];
  for (let i = 0; i < n; i++) out.push(await postBroadcast(gw.client, { data: { i }, ...body }));
  return out;
}

test('with no broadcast stream yet, welcome says bseq 0-0, and a reconnect with it gets exactly the broadcasts posted while away', async () => {
  // The first test: no broadcast was ever posted on this Redis.
  const { client, bseq } = await connect('wb-empty');
  assert.equal(bseq, '0-0');
  await client.close();
  const missed = await postMany(2);
  const again = await connect('wb-empty', { lastBseq: bseq as string });
  assert.equal(again.bseq, undefined, 'a connection with last_bseq is told nothing in welcome');
  await getsOnly(gw.client, again.client, missed.map((p) => p.bseq));
});

test('a fresh device keeps welcome\'s bseq, drops, and on reconnect with it gets exactly the broadcasts it missed: no older one', async () => {
  const old = await postMany(3);
  const { client, bseq } = await connect('wb-fresh');
  // Nothing posted since the node read the last of them: that one is the position.
  assert.equal(bseq, old[2]?.bseq);
  // It connected, got nothing yet, and dropped.
  client.ws.terminate();
  await client.waitClose();
  const missed = await postMany(3);
  const again = await connect('wb-fresh', { lastBseq: bseq as string });
  await getsOnly(gw.client, again.client, missed.map((p) => p.bseq));
});

test('live broadcasts after welcome\'s bseq come on the connection; a reconnect with the last one got gets the rest', async () => {
  const { client, bseq } = await connect('wb-live');
  const [live] = await postMany(1);
  assert.ok(compareStreamIds(live?.bseq as string, bseq as string) > 0);
  assert.deepEqual(await bcastsUntil(client, live?.bseq as string), [live?.bseq]);
  await client.close();
  const missed = await postMany(2);
  const again = await connect('wb-live', { lastBseq: live?.bseq as string });
  await getsOnly(gw.client, again.client, missed.map((p) => p.bseq));
});

test('tags: a reconnect with welcome\'s bseq gets only the missed broadcasts whose filter matches the token', async () => {
  const { client, bseq } = await connect('wb-tags', { tags: ['gold'] });
  assert.equal(typeof bseq, 'string');
  await client.close();
  const [forGold] = await postMany(1, { tags: { any: ['gold'] } });
  await postMany(1, { tags: { any: ['silver'] } });
  const [forAll] = await postMany(1);
  const again = await connect('wb-tags', { lastBseq: bseq as string, tags: ['gold'] });
  const marker = await postBroadcast(gw.client, { type: 'test.marker', data: 'marker' });
  assert.deepEqual(await bcastsUntil(again.client, marker.bseq), [forGold?.bseq, forAll?.bseq, marker.bseq]);
});

test('race: a device connecting while the node is still handing out broadcasts it read before the connect gets none at or before welcome\'s bseq, and every one after it', { timeout: 60_000 }, async (t) => {
  // A node of its own whose fan-out is slow (100 frames/s) and sends one broadcast per
  // batch (~40 KB each, batches of 64 KiB): a page the reader read goes out over
  // seconds, and a connection joining meanwhile joins in the middle of it.
  const slow = await startGateway(t, {
    redisUrl: redis.url, storeDurability: 'relaxed', broadcastRate: '100', socketHighWaterBytes: String(64 * 1024),
  });
  const listeners = await Promise.all(Array.from({ length: 10 }, async (_, i) => {
    const { client } = await slow.connectWelcomed(`wb-race-l${i}`);
    return client;
  }));
  const big = 'x'.repeat(40_000);
  const posted: Posted[] = [];
  for (let i = 0; i < 12; i++) posted.push(await postBroadcast(slow.client, { data: { i, big } }));
  // The fan-out is under way: the first listener has the first broadcasts, not all.
  const first = listeners[0] as TestClient;
  for (let i = 0; i < 3; i++) assert.equal((await first.nextOf('bcast', 20_000)).bseq, posted[i]?.bseq);
  const token = await testToken(JWT_KEY, 'wb-race');
  const device = await slow.connect('wb-race', { token });
  const welcome = await expectFrame(device, 'welcome');
  const bseq = welcome.bseq as string;
  assert.equal(typeof bseq, 'string');
  const marker = await postBroadcast(slow.client, { type: 'test.marker', data: 'marker' });
  const got = await bcastsUntil(device, marker.bseq, 30_000);
  const after = [...posted, marker].map((p) => p.bseq).filter((b) => compareStreamIds(b, bseq) > 0);
  assert.deepEqual(got, after, `welcome bseq ${bseq}: only the broadcasts after it, each once, in order`);
  // And the reconnect with it after a drop: exactly those after it again (none older).
  device.ws.terminate();
  await device.waitClose();
  const again = await slow.connect('wb-race', { token, params: { last_bseq: bseq } });
  await expectFrame(again, 'welcome');
  assert.deepEqual(await bcastsUntil(again, marker.bseq, 30_000), after);
  await Promise.all(listeners.map((l) => l.close()));
});
