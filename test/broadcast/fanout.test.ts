/**
 * The node's fan-out loop (no I/O): a batch of broadcasts reaches each receiver whose
 * tags match, in stream order, connection by connection; chunks never exceed their
 * frame budget (a receiver's share may straddle two chunks, still in order); the
 * rate limit holds over a run; and the loop yields to the event loop between chunks,
 * groups, pieces and slow writes, so that live inbox delivery is not held behind a
 * fan-out to thousands (DESIGN.md §8; the latency itself: bench:broadcast).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { BroadcastEntry, BroadcastStream } from '../../src/broadcast/broadcast-stream.js';
import { BroadcastFanout } from '../../src/broadcast/fanout.js';
import type { TagFilter } from '../../src/broadcast/filter.js';
import { BroadcastSubscription, tagSet, type BroadcastTarget, type FrameSink } from '../../src/broadcast/subscription.js';
import type { LostRange } from '../../src/streams/follower.js';

/** A receiver that records each call's bseqs (a loss as `lost <after>..<before>`). */
class Recorder implements BroadcastTarget {
  readonly calls: string[][] = [];
  constructor(readonly tags: ReadonlySet<string>) {}
  offerBroadcasts(entries: readonly BroadcastEntry[]): void {
    this.calls.push(entries.map((e) => e.id));
  }
  offerLost(range: LostRange): void {
    this.calls.push([`lost ${range.after}..${range.before}`]);
  }
  get got(): string[] {
    return this.calls.flat();
  }
}

function entry(id: string, filter?: TagFilter): BroadcastEntry {
  return { id, msgId: '0300000000000001', filter, expiresAt: undefined, frame: Buffer.from(`{"t":"bcast","bseq":"${id}"}`) };
}

test('each receiver gets the batch entries it matches, in order, in one call', async () => {
  const sent: number[] = [];
  const fanout = new BroadcastFanout({ framesPerSecond: 1_000_000, chunkFrames: 500, maxBatchBytes: 1 << 20, onSent: (n) => sent.push(n) });
  const vip = new Recorder(new Set(['vip']));
  const plain = new Recorder(new Set());
  for (const r of [vip, plain]) fanout.add(r);
  await fanout.deliver([entry('1-0'), entry('2-0', { all: ['vip'] }), entry('3-0')]);
  assert.deepEqual(vip.calls, [['1-0', '2-0', '3-0']]);
  assert.deepEqual(plain.calls, [['1-0', '3-0']]);
  assert.deepEqual(sent, [5]);
  fanout.remove(plain);
  await fanout.deliver([entry('4-0')]);
  assert.deepEqual(plain.got, ['1-0', '3-0']);
  assert.deepEqual(vip.got, ['1-0', '2-0', '3-0', '4-0']);
});

test('chunks hold at most their frame budget; the entries of one receiver stay in one chunk unless over it', async () => {
  const sent: number[] = [];
  const fanout = new BroadcastFanout({ framesPerSecond: 1_000_000, chunkFrames: 4, maxBatchBytes: 1 << 20, onSent: (n) => sent.push(n) });
  const rs = [new Recorder(new Set()), new Recorder(new Set()), new Recorder(new Set())];
  for (const r of rs) fanout.add(r);
  await fanout.deliver([entry('1-0'), entry('2-0'), entry('3-0')]);
  assert.deepEqual(sent, [3, 3, 3]);
  for (const r of rs) assert.deepEqual(r.calls, [['1-0', '2-0', '3-0']]);
  // Over the budget alone: in pieces of the budget, in order.
  sent.length = 0;
  const six = ['4-0', '5-0', '6-0', '7-0', '8-0', '9-0'];
  await fanout.deliver(six.map((id) => entry(id)));
  assert.deepEqual(sent, [4, 2, 4, 2, 4, 2]);
  for (const r of rs) assert.deepEqual(r.calls.slice(1), [six.slice(0, 4), six.slice(4)]);
});

/**
 * Runs `send` on a fan-out limited to `rate` frames/s with `receivers` receivers, and
 * asserts it took at least what `frames` frames past the first bucketful (a twentieth
 * of a second's) need; answers the receivers.
 */
async function atRate(rate: number, receivers: number, frames: number, send: (fanout: BroadcastFanout) => Promise<void>): Promise<Recorder[]> {
  const fanout = new BroadcastFanout({ framesPerSecond: rate, chunkFrames: 500, maxBatchBytes: 1 << 20 });
  const rs = Array.from({ length: receivers }, () => new Recorder(new Set()));
  for (const r of rs) fanout.add(r);
  const start = performance.now();
  await send(fanout);
  const ms = performance.now() - start;
  assert.ok(ms >= ((frames - rate / 20) / rate) * 1000 * 0.95, `${frames} frames in ${ms.toFixed(0)} ms`);
  return rs;
}

test('the rate limit holds: 600 frames at 2,000/s take at least (600 − bucket) / rate', async () => {
  const rs = await atRate(2000, 60, 600, async (fanout) => {
    for (let i = 0; i < 10; i++) await fanout.deliver([entry(`${i + 1}-0`)]);
  });
  for (const r of rs) assert.equal(r.got.length, 10);
});

test('a burst of large broadcasts reaches a socket in groups of at most maxBatchBytes, in order', async () => {
  const fanout = new BroadcastFanout({ framesPerSecond: 1_000_000, chunkFrames: 500, maxBatchBytes: 100 });
  const r = new Recorder(new Set());
  fanout.add(r);
  const big = (id: string): BroadcastEntry => ({ ...entry(id), frame: Buffer.alloc(40, 0x20) });
  const ids = ['1-0', '2-0', '3-0', '4-0', '5-0'];
  await fanout.deliver(ids.map(big));
  // 40-byte frames, at most 100 bytes a group: two, two, then one.
  assert.deepEqual(r.calls, [['1-0', '2-0'], ['3-0', '4-0'], ['5-0']]);
  // A frame over the limit alone still goes out, alone.
  const huge = new Recorder(new Set());
  fanout.remove(r);
  fanout.add(huge);
  await fanout.deliver([{ ...entry('6-0'), frame: Buffer.alloc(500) }, entry('7-0')]);
  assert.deepEqual(huge.calls, [['6-0'], ['7-0']]);
});

test('a broadcast whose ttl ends while the rate limit holds it back is sent to no one after that', async () => {
  // 100 frames/s: chunks of 5 frames (2 receivers of 2 entries each), the later ones
  // each waiting ~40 ms for their tokens.
  const fanout = new BroadcastFanout({ framesPerSecond: 100, chunkFrames: 500, maxBatchBytes: 1 << 20 });
  const rs = Array.from({ length: 10 }, () => new Recorder(new Set()));
  for (const r of rs) fanout.add(r);
  const lapses = Date.now() + 60;
  await fanout.deliver([{ ...entry('1-0'), expiresAt: lapses }, entry('2-0')]);
  assert.deepEqual(rs[0]?.got, ['1-0', '2-0'], 'the first chunk goes out at once, before the ttl ends');
  assert.deepEqual(rs[9]?.got, ['2-0'], 'the last one, ~150 ms later, without the lapsed broadcast');
  for (const r of rs) assert.ok(r.got.includes('2-0'));
});

test('a loss goes to every receiver, in its place between batches', async () => {
  const fanout = new BroadcastFanout({ framesPerSecond: 1_000_000, chunkFrames: 2, maxBatchBytes: 1 << 20 });
  const rs = Array.from({ length: 5 }, () => new Recorder(new Set(['x'])));
  for (const r of rs) fanout.add(r);
  await fanout.deliver([entry('1-0')]);
  await fanout.deliverLost({ after: '1-0', before: '9-0', lastLost: '8-0' });
  await fanout.deliver([entry('9-0', { all: ['x'] })]);
  for (const r of rs) assert.deepEqual(r.calls, [['1-0'], ['lost 1-0..9-0'], ['9-0']]);
});

test('a loss is told under the rate limit like any frame: 40 receivers at 100 frames/s take at least (40 − bucket) / rate', async () => {
  const rs = await atRate(100, 40, 40, (fanout) => fanout.deliverLost({ after: '1-0', before: '9-0', lastLost: '8-0' }));
  for (const r of rs) assert.deepEqual(r.calls, [['lost 1-0..9-0']]);
});

test('a group of broadcasts fills maxBatchBytes exactly, and a chunk its frame budget exactly', async () => {
  const bytes = new BroadcastFanout({ framesPerSecond: 1_000_000, chunkFrames: 500, maxBatchBytes: 100 });
  const r = new Recorder(new Set());
  bytes.add(r);
  const fifty = (id: string): BroadcastEntry => ({ ...entry(id), frame: Buffer.alloc(50, 0x20) });
  await bytes.deliver(['1-0', '2-0', '3-0'].map(fifty));
  // 50 + 50 is the limit, not over it.
  assert.deepEqual(r.calls, [['1-0', '2-0'], ['3-0']]);

  const sent: number[] = [];
  const frames = new BroadcastFanout({ framesPerSecond: 1_000_000, chunkFrames: 4, maxBatchBytes: 1 << 20, onSent: (n) => sent.push(n) });
  const rs = Array.from({ length: 4 }, () => new Recorder(new Set()));
  for (const x of rs) frames.add(x);
  await frames.deliver([entry('4-0'), entry('5-0')]);
  // Two receivers of two frames each make one chunk of four.
  assert.deepEqual(sent, [4, 4]);
});

test('a feed stopped with the fan-out (its socket closed) leaves it: no longer counted, sent nothing more', async () => {
  const fanout = new BroadcastFanout({ framesPerSecond: 1_000_000, chunkFrames: 500, maxBatchBytes: 1 << 20 });
  const written: string[] = [];
  const sink: FrameSink = {
    send: (frame) => { written.push(String(frame)); return true; },
    sendFrames: (entries) => { for (const e of entries) written.push(e.frame.toString()); },
    whenWritable: () => undefined,
  };
  const feed = new BroadcastSubscription(tagSet([]), sink);
  feed.join(fanout, false);
  // Live only (no last_bseq): the stream is not read.
  await feed.resume({} as BroadcastStream, undefined);
  assert.equal(fanout.size, 1);
  await fanout.deliver([entry('1-0')]);
  assert.deepEqual(written, ['{"t":"bcast","bseq":"1-0"}']);
  feed.stop(fanout);
  assert.equal(fanout.size, 0);
  await fanout.deliver([entry('2-0')]);
  assert.deepEqual(written, ['{"t":"bcast","bseq":"1-0"}']);
});

/**
 * Runs `work` and notes `probe()` at each turn of the event loop while it runs (a chain
 * of setImmediate callbacks, which run only when `work` yields to the loop: what live
 * inbox delivery, waiting on I/O, needs from a fan-out). Answers the notes, in order.
 */
async function turnsDuring<T>(work: () => Promise<void>, probe: () => T): Promise<T[]> {
  const seen: T[] = [];
  let done = false;
  const turn = (): void => {
    if (done) return;
    seen.push(probe());
    setImmediate(turn);
  };
  setImmediate(turn);
  await work();
  done = true;
  return seen;
}

/** A receiver whose write takes `ms` of the thread (a slow socket write, many frames). */
class SlowRecorder extends Recorder {
  constructor(readonly ms: number) {
    super(new Set());
  }
  override offerBroadcasts(entries: readonly BroadcastEntry[]): void {
    const until = performance.now() + this.ms;
    while (performance.now() < until) { /* the thread is held */ }
    super.offerBroadcasts(entries);
  }
}

// What the live-latency bench measures (bench:broadcast, "inbox p99 during broadcasts")
// rests on these: a fan-out to thousands of sockets never holds the thread for long.

test('the fan-out yields to the event loop between chunks: after each one, before the next', async () => {
  const sent: number[] = [];
  const fanout = new BroadcastFanout({ framesPerSecond: 1_000_000, chunkFrames: 4, maxBatchBytes: 1 << 20, onSent: (n) => sent.push(n) });
  for (let i = 0; i < 12; i++) fanout.add(new Recorder(new Set()));
  const seen = await turnsDuring(() => fanout.deliver([entry('1-0')]), () => sent.length);
  assert.deepEqual(sent, [4, 4, 4]);
  for (const chunks of [1, 2]) assert.ok(seen.includes(chunks), `a turn of the loop after ${chunks} of 3 chunks: ${seen.join(' ')}`);
});

test('within a chunk, the fan-out yields once its writes held the thread a millisecond', async () => {
  const rs = Array.from({ length: 5 }, () => new SlowRecorder(1.2));
  const fanout = new BroadcastFanout({ framesPerSecond: 1_000_000, chunkFrames: 500, maxBatchBytes: 1 << 20 });
  for (const r of rs) fanout.add(r);
  const seen = await turnsDuring(() => fanout.deliver([entry('1-0')]), () => rs.filter((r) => r.got.length > 0).length);
  for (const r of rs) assert.deepEqual(r.got, ['1-0']);
  for (const written of [1, 2, 3, 4]) assert.ok(seen.includes(written), `a turn of the loop after ${written} of 5 slow writes: ${seen.join(' ')}`);
});

test('the fan-out yields between groups of maxBatchBytes, and between the pieces of one receiver\'s share over the chunk', async () => {
  const r = new Recorder(new Set());
  const bytes = new BroadcastFanout({ framesPerSecond: 1_000_000, chunkFrames: 500, maxBatchBytes: 100 });
  bytes.add(r);
  const big = (id: string): BroadcastEntry => ({ ...entry(id), frame: Buffer.alloc(40, 0x20) });
  const groups = await turnsDuring(() => bytes.deliver(['1-0', '2-0', '3-0', '4-0', '5-0'].map(big)), () => r.calls.length);
  assert.deepEqual(r.calls, [['1-0', '2-0'], ['3-0', '4-0'], ['5-0']]);
  for (const calls of [1, 2]) assert.ok(groups.includes(calls), `a turn of the loop after ${calls} of 3 groups: ${groups.join(' ')}`);

  const alone = new Recorder(new Set());
  const pieces = new BroadcastFanout({ framesPerSecond: 1_000_000, chunkFrames: 2, maxBatchBytes: 1 << 20 });
  pieces.add(alone);
  const seen = await turnsDuring(() => pieces.deliver(['1-0', '2-0', '3-0', '4-0', '5-0', '6-0'].map((id) => entry(id))), () => alone.calls.length);
  assert.deepEqual(alone.calls, [['1-0', '2-0'], ['3-0', '4-0'], ['5-0', '6-0']]);
  for (const calls of [1, 2]) assert.ok(seen.includes(calls), `a turn of the loop after ${calls} of 3 pieces: ${seen.join(' ')}`);
});

test('a loss told to many receivers yields between its chunks too', async () => {
  const sent: number[] = [];
  const fanout = new BroadcastFanout({ framesPerSecond: 1_000_000, chunkFrames: 2, maxBatchBytes: 1 << 20, onSent: (n) => sent.push(n) });
  for (let i = 0; i < 6; i++) fanout.add(new Recorder(new Set()));
  const seen = await turnsDuring(() => fanout.deliverLost({ after: '1-0', before: '9-0', lastLost: '8-0' }), () => sent.length);
  assert.deepEqual(sent, [2, 2, 2]);
  for (const chunks of [1, 2]) assert.ok(seen.includes(chunks), `a turn of the loop after ${chunks} of 3 chunks: ${seen.join(' ')}`);
});
