/**
 * Entries of the broadcast stream as a node reads them (broadcast-stream.ts, DESIGN.md
 * §8): an entry missing a field, with an `s` or `e` that is no time, a `d` or `f` that
 * is no JSON or a filter of another shape is malformed — left out, never sent (nor sent to
 * everyone for want of its filter), and a catch-up reads past a page of them;
 * a page ending on a malformed entry still reads up to it, so the node's reader moves
 * past it; a filter of `any` alone is kept on the entry; a `ttl` ends at its instant.
 * A feed whose catch-up cannot even read the stream's bounds tells what it could not
 * read as a gap before its next broadcast. A real private redis-server for the stream.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { BroadcastStream, isExpired, parseBroadcastEntry, type BroadcastEntry } from '../../src/broadcast/broadcast-stream.js';
import { BroadcastFanout } from '../../src/broadcast/fanout.js';
import { BroadcastSubscription, tagSet } from '../../src/broadcast/subscription.js';
import { createRedis } from '../../src/redis/client.js';
import { Keys } from '../../src/redis/keys.js';
import { openInbox } from '../harness/checks.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

const MSG_ID = '0300000000000001';
const cleanup = cleanupList();
let server: RedisServer;
let redis: Redis;

before(async () => {
  server = await RedisServer.start();
  cleanup.after(() => server.destroy());
  ({ redis } = await openInbox(cleanup, server.url));
});

after(() => cleanup.run());

/** The fields of a well-formed entry, with `changes` applied (an undefined value drops the field). */
function fields(changes: Record<string, string | undefined> = {}): string[] {
  const all: Record<string, string | undefined> = { m: MSG_ID, y: 'news', s: '1700000000000', d: '{"n":1}', e: '1800000000000', ...changes };
  return Object.entries(all).flatMap(([k, v]) => (v === undefined ? [] : [k, v]));
}

test('a well-formed entry gives its bcast frame as JSON; one missing a field, with a bad s or e, or a d or f that is no JSON is malformed', () => {
  const good = parseBroadcastEntry(['5-0', fields({ f: '{"any":["vip"]}' })]);
  assert.ok(good);
  assert.deepEqual(JSON.parse(good.frame.toString()), { t: 'bcast', bseq: '5-0', id: MSG_ID, type: 'news', ts: 1700000000000, data: { n: 1 } });
  assert.deepEqual([good.filter, good.expiresAt], [{ any: ['vip'] }, 1800000000000]);
  for (const name of ['m', 'y', 's', 'd']) {
    assert.equal(parseBroadcastEntry(['5-0', fields({ [name]: undefined })]), undefined, `without ${name}`);
  }
  assert.equal(parseBroadcastEntry(['5-0', fields({ e: 'soon' })]), undefined, 'an e that is no time');
  assert.equal(parseBroadcastEntry(['5-0', fields({ e: '1.5' })]), undefined, 'an e that is no whole ms');
  // Written into the frame as they are, they made one that is not JSON ("ts":NaN, "data":hello).
  assert.equal(parseBroadcastEntry(['5-0', fields({ s: 'soon' })]), undefined, 'an s that is no time');
  for (const d of ['hello', '{"n":', '']) assert.equal(parseBroadcastEntry(['5-0', fields({ d })]), undefined, `a d that is no JSON: ${d}`);
  // Read without its filter it would go to every connection, not only the tagged ones.
  assert.equal(parseBroadcastEntry(['5-0', fields({ f: '{"any":["vip"]' })]), undefined, 'an f that is no JSON');
  // Another writer's filter of another shape (it threw in every connection's match, failing the batch for all).
  for (const f of ['{"all":"vip"}', '{"any":[1]}', '["vip"]', 'null', '"vip"']) {
    assert.equal(parseBroadcastEntry(['5-0', fields({ f })]), undefined, `an f of another shape: ${f}`);
  }
});

test('a broadcast\'s ttl has ended at the instant it names, not a millisecond later', () => {
  const entry = parseBroadcastEntry(['5-0', fields({ e: '1000' })]);
  assert.ok(entry);
  assert.equal(isExpired(entry, 999), false);
  assert.equal(isExpired(entry, 1000), true);
  const forever = parseBroadcastEntry(['6-0', fields({ e: undefined })]);
  assert.ok(forever);
  assert.equal(isExpired(forever, Number.MAX_SAFE_INTEGER), false, 'an entry without e never lapses');
});

test('a page that ends on a malformed entry reads up to it (the reader moves past it), and leaves it out', async () => {
  const stream = new BroadcastStream(redis, new Keys('entries-malformed:'), 10);
  const good = await stream.publish({ msgId: MSG_ID, type: 'news', ts: Date.now(), dataJson: '{"n":1}', filter: undefined, expiresAt: Date.now() + 60_000 });
  const bad = await redis.xadd(stream.key, '*', 'm', MSG_ID, 'y', 'news') as string;
  const page = await stream.rangeWithBounds('0-0', 10);
  assert.deepEqual(page.entries.map((e) => e.id), [good]);
  assert.deepEqual(page.malformed, [bad]);
  assert.equal(page.readUpTo, bad);
  assert.equal((await stream.rangeWithBounds(page.readUpTo, 10)).readUpTo, undefined, 'nothing after it');
  // A position that is no stream ID is the caller's mistake, not Redis being unavailable.
  await assert.rejects(stream.rangeWithBounds('yesterday', 10), { code: 'INVALID_REQUEST' });
});

test('a catch-up reads past a page of nothing but malformed entries to the broadcasts after it', async () => {
  const stream = new BroadcastStream(redis, new Keys('entries-malformed-page:'), 1_000);
  const publish = (n: number): Promise<string> => stream.publish({ msgId: MSG_ID, type: 'news', ts: Date.now(), dataJson: String(n), filter: undefined, expiresAt: Date.now() + 60_000 });
  const first = await publish(1);
  // More malformed entries (another writer's) than one catch-up page holds (200).
  for (let i = 0; i < 250; i++) await redis.xadd(stream.key, '*', 'm', MSG_ID, 'y', 'news');
  const after = await publish(2);
  const written: string[] = [];
  const feed = new BroadcastSubscription(tagSet([]), {
    send: (frame) => { written.push(String(frame)); return true; },
    sendFrames: (entries) => { for (const e of entries) written.push(e.frame.toString()); },
    whenWritable: () => undefined,
  });
  const fanout = new BroadcastFanout({ framesPerSecond: 1_000_000, chunkFrames: 500, maxBatchBytes: 1 << 20, position: () => after });
  feed.join(fanout, true);
  await feed.resume(stream, first);
  assert.deepEqual(written.map((f) => (JSON.parse(f) as { bseq: string }).bseq), [after]);
});

test('a filter of any alone, or of all alone, is kept on the entry', async () => {
  const stream = new BroadcastStream(redis, new Keys('entries-filter:'), 10);
  const any = await stream.publish({ msgId: MSG_ID, type: 'news', ts: Date.now(), dataJson: '1', filter: { any: ['vip', 'beta'] }, expiresAt: Date.now() + 60_000 });
  const all = await stream.publish({ msgId: MSG_ID, type: 'news', ts: Date.now(), dataJson: '2', filter: { all: ['vip'] }, expiresAt: Date.now() + 60_000 });
  const none = await stream.publish({ msgId: MSG_ID, type: 'news', ts: Date.now(), dataJson: '3', filter: undefined, expiresAt: Date.now() + 60_000 });
  const page = await stream.rangeWithBounds('0-0', 10);
  assert.deepEqual(page.entries.map((e) => [e.id, e.filter]), [[any, { any: ['vip', 'beta'] }], [all, { all: ['vip'] }], [none, undefined]]);
});

test('a catch-up whose bounds read fails (Redis gone): a gap from last_bseq to the next live broadcast, which follows', async () => {
  const gone = await createRedis({ url: server.url, commandTimeoutMs: 10_000 });
  const stream = new BroadcastStream(gone, new Keys('entries-gone:'), 10);
  gone.disconnect();
  const written: string[] = [];
  const feed = new BroadcastSubscription(tagSet([]), {
    send: (frame) => { written.push(String(frame)); return true; },
    sendFrames: (entries) => { for (const e of entries) written.push(e.frame.toString()); },
    whenWritable: () => undefined,
  });
  // The node's reader had handed out up to 9-0 when the client came back after 3-0.
  const fanout = new BroadcastFanout({ framesPerSecond: 1_000_000, chunkFrames: 500, maxBatchBytes: 1 << 20, position: () => '9-0' });
  feed.join(fanout, true);
  await assert.rejects(feed.resume(stream, '3-0'), { code: 'UNAVAILABLE' });
  const live = parseBroadcastEntry(['10-0', fields()]) as BroadcastEntry;
  await fanout.deliver([live]);
  assert.deepEqual(written, [JSON.stringify({ t: 'gap', stream: 'broadcast', from: '3-0', to: '10-0' }), live.frame.toString()]);
});
