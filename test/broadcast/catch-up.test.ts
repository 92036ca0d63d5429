/**
 * Broadcast catch-up with `last_bseq` (DESIGN.md §6, §8; docs/protocol.md): with no
 * `last_bseq` a connection gets live broadcasts only; with one it first gets the
 * retained broadcasts after it, in order. A stream trimmed past `last_bseq` is told as
 * `gap {stream: "broadcast", from, to}` (both bounds exclusive); a `last_bseq` the
 * stream cannot have held (it was lost: FLUSHALL) as `reset {stream: "broadcast",
 * bseq}`; either way the retained broadcasts follow, then live ones.
 *
 * The service keeps 5 broadcasts (`broadcastStreamCap`); every case reads each frame
 * in turn and ends on a live marker, so a missing, extra or repeated frame fails.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { openInbox } from '../harness/checks.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import type { TestClient } from '../harness/ws-client.js';
import { expectRefused, startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { expectFrame, nextBcast, postBroadcast, type Posted } from './broadcast-fixture.js';

const CAP = 5;
const cleanup = cleanupList();
let redis: RedisServer;
let gw: GatewayFixture;
let admin: Redis;

before(async () => {
  redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed', broadcastStreamCap: String(CAP) });
  admin = (await openInbox(cleanup, redis.url)).redis;
});

after(() => cleanup.run());

/** Every broadcast posted since the stream was last flushed, in order. */
let stream: Posted[] = [];

/** Posts `n` broadcasts, in order. */
async function postMany(n: number, tag: string): Promise<Posted[]> {
  const out: Posted[] = [];
  for (let i = 0; i < n; i++) out.push(await postBroadcast(gw.client, { data: { tag, i } }));
  stream.push(...out);
  return out;
}

/** What the stream retains now: the last {@link CAP} posted. */
function retained(): Posted[] {
  return stream.slice(-CAP);
}

/** Connects `user` (resuming after `lastBseq` when given) and reads the welcome. */
async function connect(user: string, lastBseq?: string): Promise<TestClient> {
  const client = await gw.connect(user, lastBseq !== undefined ? { params: { last_bseq: lastBseq } } : {});
  await expectFrame(client, 'welcome');
  return client;
}

/** Reads `bcast` frames and asserts they are exactly `expected`, in order. */
async function expectBcasts(client: TestClient, expected: readonly Posted[]): Promise<void> {
  for (const p of expected) {
    const f = await nextBcast(client);
    assert.equal(f.bseq, p.bseq, `expected ${p.bseq}, got ${JSON.stringify(f)}`);
    assert.equal(f.id, p.id);
  }
}

/** `user` connects, gets one live broadcast and leaves; resolves with that broadcast. */
async function seenThenGone(user: string): Promise<Posted> {
  const client = await connect(user);
  const [seen] = await postMany(1, 'seen') as [Posted];
  await expectBcasts(client, [seen]);
  await client.close();
  return seen;
}

/** Posts a live marker and asserts it is the next frame. */
async function expectLiveNext(client: TestClient): Promise<void> {
  const [marker] = await postMany(1, 'marker') as [Posted];
  await expectBcasts(client, [marker]);
}

test('without last_bseq a connection gets live broadcasts only', async () => {
  await postMany(2, 'before');
  const client = await connect('live-only');
  const [live] = await postMany(1, 'live') as [Posted];
  // The next frame is the live one: nothing from before the connection came first.
  await expectBcasts(client, [live]);
  await client.close();
});

test('last_bseq trimmed past: gap {stream: broadcast} to the first retained, the retained ones, then live', async () => {
  const seen = await seenThenGone('trimmed');
  await postMany(12, 'offline');
  assert.equal(await admin.xlen('px:broadcast'), CAP);
  const back = await connect('trimmed', seen.bseq);
  assert.deepEqual(await expectFrame(back, 'gap'), { t: 'gap', stream: 'broadcast', from: seen.bseq, to: (retained()[0] as Posted).bseq });
  await expectBcasts(back, retained());
  await expectLiveNext(back);
  await back.close();

  // At the edge: last_bseq is the newest trimmed entry, so nothing after it is missing.
  const edge = await connect('trimmed-edge', (stream[stream.length - CAP - 1] as Posted).bseq);
  await expectBcasts(edge, retained());
  await expectLiveNext(edge);
  await edge.close();
  // One older: a gap again.
  const older = await connect('trimmed-older', (stream[stream.length - CAP - 2] as Posted).bseq);
  assert.equal((await expectFrame(older, 'gap')).to, (retained()[0] as Posted).bseq);
  await expectBcasts(older, retained());
  await expectLiveNext(older);
  await older.close();
  // Within what is retained: the rest of it, no gap.
  const within = await connect('trimmed-within', (retained()[1] as Posted).bseq);
  await expectBcasts(within, retained().slice(2));
  await expectLiveNext(within);
  await within.close();
});

test('last_bseq at either end of what is retained: no reset and no gap, only what follows it, then live', async () => {
  await postMany(CAP + 3, 'ends');
  assert.equal(await admin.xlen('px:broadcast'), CAP);
  const kept = retained();
  // The newest bseq: the client missed nothing. A reset here would make it drop its
  // state and take every retained broadcast again.
  const newest = await connect('ends-newest', (kept[kept.length - 1] as Posted).bseq);
  await expectLiveNext(newest);
  await newest.close();
  // The same bseq written with leading zeros is the same position.
  const [ms, seq] = (retained()[CAP - 1] as Posted).bseq.split('-') as [string, string];
  const padded = await connect('ends-padded', `00${ms}-000${seq}`);
  await expectLiveNext(padded);
  await padded.close();
  // The first retained bseq (the stream was trimmed just before it): the rest of the
  // retained ones, no reset (it is an entry of this stream) and no gap (nothing
  // after it is missing).
  const first = await connect('ends-first', (retained()[0] as Posted).bseq);
  await expectBcasts(first, retained().slice(1));
  await expectLiveNext(first);
  await first.close();
});

test('a broadcast whose ttl has ended is sent to no one: not on catch-up, not live; its entry carries the end of its ttl', async () => {
  const seen = await seenThenGone('lapsed');
  const live = await connect('lapsed-live');
  const [kept] = await postMany(1, 'kept-ttl') as [Posted];
  // The entry carries when the ttl ends: the stored record's expiry.
  const record = await gw.client.get(`/v1/messages/${kept.id}`);
  const entry = await admin.xrange('px:broadcast', kept.bseq, kept.bseq);
  const fields = entry[0]?.[1] ?? [];
  assert.equal(fields[fields.indexOf('e') + 1], String((record.body as { expires_at: number }).expires_at));
  // One whose ttl has ended, as the stream holds it when a node or a client reads late.
  const lapsed: Posted = { id: '0300000000000fff', bseq: await admin.xadd('px:broadcast', '*', 'm', '0300000000000fff', 'y', 'test.news',
    's', String(Date.now() - 5000), 'd', '{"lapsed":true}', 'e', String(Date.now() - 1)) as string };
  stream.push(lapsed);
  const [after] = await postMany(1, 'after-lapsed') as [Posted];
  await expectBcasts(live, [kept, after]);
  const back = await connect('lapsed', seen.bseq);
  await expectBcasts(back, [kept, after]);
  await expectLiveNext(back);
  await back.close();
  await live.close();
});

test('last_bseq beyond the stream (FLUSHALL): reset {stream: broadcast}, the retained ones, then live', async () => {
  const seen = await seenThenGone('flushed');
  await admin.flushall();
  stream = [];

  // Nothing retained: the reset, then live broadcasts.
  const empty = await connect('flushed', seen.bseq);
  assert.deepEqual(await expectFrame(empty, 'reset'), { t: 'reset', stream: 'broadcast', bseq: '0-0' });
  // Another device with the bseq that reset gave (0-0), the stream still missing:
  // nothing was missed since, so no reset, only live broadcasts (the next frame).
  const again = await connect('flushed-again', '0-0');
  const [marker] = await postMany(1, 'marker') as [Posted];
  await expectBcasts(empty, [marker]);
  await expectBcasts(again, [marker]);
  await empty.close();
  await again.close();

  // New broadcasts since the loss: the old last_bseq was never an entry of this stream.
  await admin.flushall();
  stream = [];
  const since = await postMany(2, 'since');
  const back = await connect('flushed', seen.bseq);
  assert.deepEqual(await expectFrame(back, 'reset'), { t: 'reset', stream: 'broadcast', bseq: (since[1] as Posted).bseq });
  await expectBcasts(back, since);
  await expectLiveNext(back);
  await back.close();
});

test('last_bseq beyond a stream that was trimmed: reset, then every retained broadcast with no gap before them, then live', async () => {
  await postMany(CAP + 2, 'trimmed-then-future');
  const kept = retained();
  assert.equal(await admin.xlen('px:broadcast'), CAP);
  // A bseq this stream never reached (the client read a stream that was lost, whose
  // clock ran further): after the reset the client starts over, so the entries the
  // trim removed before it were never its to miss.
  const future = await connect('trimmed-future', `${Date.now() + 86_400_000}-0`);
  assert.deepEqual(await expectFrame(future, 'reset'), { t: 'reset', stream: 'broadcast', bseq: (kept[CAP - 1] as Posted).bseq });
  await expectBcasts(future, kept);
  await expectLiveNext(future);
  await future.close();
});

test('a malformed last_bseq is refused before the upgrade (400)', async () => {
  await expectRefused(gw.connect('bad-bseq', { params: { last_bseq: 'yesterday' } }), 400, 'INVALID_REQUEST');
});

test('a broadcast\'s ttl is seconds: posted with ttl 600, it is kept, and sent on catch-up, until 600 s later', async () => {
  const seen = await seenThenGone('ttl-seconds');
  const postedAt = Date.now();
  const kept = await postBroadcast(gw.client, { data: { tag: 'ttl-600' }, ttl: 600 });
  stream.push(kept);
  const record = await gw.client.get(`/v1/messages/${kept.id}`);
  const expiresAt = (record.body as { expires_at: number }).expires_at;
  assert.ok(Math.abs(expiresAt - (postedAt + 600_000)) < 5000, `expires_at ${expiresAt - postedAt} ms after the post`);
  const fields = (await admin.xrange('px:broadcast', kept.bseq, kept.bseq))[0]?.[1] ?? [];
  assert.equal(fields[fields.indexOf('e') + 1], String(expiresAt));
  const back = await connect('ttl-seconds', seen.bseq);
  await expectBcasts(back, [kept]);
  await expectLiveNext(back);
  await back.close();
});
