/**
 * Broadcast catch-up while publishes trim the stream (docs/protocol.md, `gap`): the
 * pages of a catch-up are read one after another, and entries trimmed between two
 * reads, past the last one sent, are told as a `gap` from it to the first retained
 * entry before the next page — never skipped silently. Each page is read with the
 * stream's bounds in one MULTI (broadcast-stream.ts `rangeWithBounds`). A real private
 * redis-server; the trim is made to land between the first and second page.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { BroadcastStream, type BroadcastPage } from '../../src/broadcast/broadcast-stream.js';
import { BroadcastSubscription } from '../../src/broadcast/subscription.js';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { createRedis } from '../../src/redis/client.js';
import { Keys } from '../../src/redis/keys.js';
import { RedisServer } from '../harness/redis-server.js';

const CAP = 300;
let server: RedisServer;
let redis: Redis;
let counter = 0;

before(async () => {
  server = await RedisServer.start();
  redis = await createRedis({ url: server.url, commandTimeoutMs: 10_000 });
});

after(async () => {
  redis?.disconnect();
  await server?.destroy();
});

/** Publishes `n` broadcasts in order; answers their bseqs. */
async function publish(stream: BroadcastStream, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    counter += 1;
    ids.push(await stream.publish({ msgId: encodeMsgId({ partition: 0, kind: MsgKind.broadcast, counter }), type: 't', ts: Date.now(), dataJson: String(counter), filter: undefined, expiresAt: Date.now() + 3_600_000 }));
  }
  return ids;
}

/** The real stream, with `before` run once before its second page read. */
class StreamTrimmedAfterFirstPage extends BroadcastStream {
  #reads = 0;
  constructor(redisClient: Redis, keys: Keys, readonly before: () => Promise<void>) {
    super(redisClient, keys, CAP);
  }

  override async rangeWithBounds(afterId: string, count: number): Promise<BroadcastPage> {
    this.#reads += 1;
    if (this.#reads === 2) await this.before();
    return super.rangeWithBounds(afterId, count);
  }
}

test('trimmed past the last entry sent between two catch-up pages: a gap from it to the first retained entry, then the rest', async () => {
  const keys = new Keys('trim:');
  const plain = new BroadcastStream(redis, keys, CAP);
  const first = await publish(plain, CAP);
  const later: string[] = [];
  // Before the second page: 250 more, which trim the stream past the first page's end.
  const stream = new StreamTrimmedAfterFirstPage(redis, keys, async () => { later.push(...await publish(plain, 250)); });
  const frames: { t: string; bseq?: string; from?: string; to?: string }[] = [];
  const sink = {
    send: (frame: string | Buffer) => { frames.push(JSON.parse(frame.toString()) as { t: string }); return true; },
    sendFrames: (entries: readonly { frame: Buffer }[]) => { for (const e of entries) frames.push(JSON.parse(e.frame.toString()) as { t: string }); },
    whenWritable: () => undefined,
  };
  const sub = new BroadcastSubscription(new Set(), sink);
  await sub.resume(stream, first[9]);
  const all = [...first, ...later];
  const retained = all.slice(-CAP);
  // Page 1: entries 11..210 (page size 200); then the gap; then every retained one.
  const expected = [
    ...first.slice(10, 210).map((bseq) => ({ t: 'bcast', bseq })),
    { t: 'gap', from: first[209], to: retained[0] },
    ...retained.map((bseq) => ({ t: 'bcast', bseq })),
  ];
  assert.deepEqual(frames.map((f) => (f.t === 'gap' ? { t: f.t, from: f.from, to: f.to } : { t: f.t, bseq: f.bseq })), expected);
});

test('a stream trimmed past last_bseq before the first page: one gap, then the retained ones; none when nothing after it was trimmed', async () => {
  const keys = new Keys('trim2:');
  const stream = new BroadcastStream(redis, keys, 5);
  const ids = await publish(stream, 8);
  const frames: { t: string; bseq?: string; from?: string; to?: string }[] = [];
  const sink = {
    send: (frame: string | Buffer) => { frames.push(JSON.parse(frame.toString()) as { t: string }); return true; },
    sendFrames: () => undefined,
    whenWritable: () => undefined,
  };
  await new BroadcastSubscription(new Set(), sink).resume(stream, ids[0]);
  assert.deepEqual(frames.map((f) => f.t), ['gap', 'bcast', 'bcast', 'bcast', 'bcast', 'bcast']);
  assert.deepEqual([frames[0]?.from, frames[0]?.to], [ids[0], ids[3]]);
  // The newest trimmed entry itself: nothing after it is missing.
  frames.length = 0;
  await new BroadcastSubscription(new Set(), sink).resume(stream, ids[2]);
  assert.deepEqual(frames.map((f) => f.bseq ?? f.t), ids.slice(3));
});

test('a publish that trims several entries at once (the cap lowered at a restart) records the highest one trimmed', async () => {
  const keys = new Keys('lowered:');
  const ids = await publish(new BroadcastStream(redis, keys, 10), 10);
  const smaller = new BroadcastStream(redis, keys, 4);
  const next = await publish(smaller, 1);
  // 11 entries, 4 kept: the first 7 trimmed, the 7th the highest.
  assert.deepEqual(await smaller.bounds(), { first: ids[7], last: next[0], maxDeleted: ids[6] });
});
