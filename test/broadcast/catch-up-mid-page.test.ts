/**
 * A client back with `last_bseq` while the node's fan-out is part-way through a page
 * (it sends a page in groups of maxBatchBytes, yielding between them), the stream
 * trimmed past `last_bseq` by later publishes: the real BroadcastSubscription (its
 * StreamFollower) and BroadcastFanout against a scripted stream, the interleaving made
 * exact — the catch-up's page read answers right after the fan-out's first group
 * reached the connection, before its next group.
 *
 * Before, the catch-up's gap ended at the first live broadcast queued so far; the
 * page's trimmed broadcasts the fan-out handed the connection after the catch-up page
 * went out were dropped as "already sent": never sent and inside no gap (a reviewer's
 * finding). A client ahead of the reader got a gap whose `to` was before its `from`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseBroadcastEntry, type BroadcastBounds, type BroadcastEntry, type BroadcastPage, type BroadcastStream } from '../../src/broadcast/broadcast-stream.js';
import { BroadcastFanout } from '../../src/broadcast/fanout.js';
import { BroadcastSubscription, type FrameSink } from '../../src/broadcast/subscription.js';
import { compareStreamIds } from '../../src/streams/stream-id.js';

/** A broadcast `<n>-0`, as the stream gives it. */
function entry(n: number): BroadcastEntry {
  return parseBroadcastEntry([`${n}-0`, ['m', '0300000000000001', 'y', 't', 's', '1', 'd', '{}']]) as BroadcastEntry;
}

/** A connection that records its frames: a bseq for a `bcast`, `gap <from>..<to>` for a gap. */
class Frames implements FrameSink {
  readonly got: string[] = [];
  send(frame: string | Buffer): boolean {
    this.#record(JSON.parse(frame.toString()) as Record<string, string>);
    return true;
  }
  sendFrames(entries: readonly { readonly frame: Buffer }[]): void {
    for (const e of entries) this.#record(JSON.parse(e.frame.toString()) as Record<string, string>);
  }
  whenWritable(): undefined {
    return undefined;
  }
  #record(f: Record<string, string>): void {
    this.got.push(f.t === 'bcast' ? (f.bseq as string) : `${f.t} ${f.from}..${f.to}`);
  }
}

/**
 * The node at the moment the client comes back: its reader read `page` (its position
 * is the page's last), and the stream now retains `retained` (the page's first ones
 * trimmed). The client connects with `lastBseq`; the fan-out sends the page one
 * broadcast per group, and the catch-up's first read answers once the first group
 * reached the connection. Then the reader's next read: a loss when the stream was
 * trimmed past its page, and the retained broadcasts after it.
 */
async function comeBackMidPage(page: readonly number[], retained: readonly number[], lastBseq: string): Promise<string[]> {
  const bounds: BroadcastBounds = { first: `${retained[0]}-0`, last: `${retained[retained.length - 1]}-0`, maxDeleted: `${(retained[0] as number) - 1}-0` };
  const position = `${page[page.length - 1]}-0`;
  let groups = 0;
  let firstGroupOut: () => void = () => undefined;
  const firstGroup = new Promise<void>((resolve) => { firstGroupOut = resolve; });
  const fanout = new BroadcastFanout({
    framesPerSecond: 1_000_000,
    chunkFrames: 500,
    // One broadcast per group: the fan-out yields to the event loop between them.
    maxBatchBytes: entry(1).frame.length,
    position: () => position,
    onSent: () => {
      groups += 1;
      if (groups === 1) firstGroupOut();
    },
  });
  const frames = new Frames();
  const sub = new BroadcastSubscription(new Set(), frames);
  sub.join(fanout, true);
  const stream = {
    bounds: async (): Promise<BroadcastBounds> => bounds,
    rangeWithBounds: async (after: string): Promise<BroadcastPage> => {
      // The first read is answered right after the fan-out's first group went out.
      if (groups === 0) await firstGroup;
      const entries = retained.map(entry).filter((e) => compareStreamIds(e.id, after) > 0);
      return { entries, malformed: [], readUpTo: entries[entries.length - 1]?.id, bounds };
    },
  } as unknown as BroadcastStream;
  const resumed = sub.resume(stream, lastBseq);
  await fanout.deliver(page.map(entry));
  await resumed;
  // The reader's next read, after its page: what was trimmed past it is a loss.
  const next = retained.filter((n) => n > (page[page.length - 1] as number));
  if (retained[0] as number > (page[page.length - 1] as number) + 1) {
    await fanout.deliverLost({ after: position, before: `${next[0]}-0`, lastLost: bounds.maxDeleted });
  }
  await fanout.deliver(next.map(entry));
  await fanout.deliver([entry((retained[retained.length - 1] as number) + 1)]);
  return frames.got;
}

/**
 * Every broadcast after `from` up to `to` arrived once, in order, or lies inside a gap;
 * every gap's `from` is before its `to`.
 */
function assertAccounted(got: readonly string[], from: number, to: number): void {
  const sent = got.filter((f) => !f.startsWith('gap')).map((f) => Number(f.split('-')[0]));
  for (let i = 1; i < sent.length; i++) assert.ok((sent[i] as number) > (sent[i - 1] as number), `in order, each once: ${got.join(', ')}`);
  const gaps = got.filter((f) => f.startsWith('gap')).map((f) => f.slice(4).split('..').map((id) => Number(id.split('-')[0])) as [number, number]);
  for (const [a, b] of gaps) assert.ok(a < b, `a gap ends after it begins: ${got.join(', ')}`);
  for (let n = from + 1; n <= to; n++) {
    assert.ok(sent.includes(n) || gaps.some(([a, b]) => a < n && n < b), `${n}-0 neither sent nor inside a gap: ${got.join(', ')}`);
  }
}

test('a catch-up\'s trim gap covers trimmed broadcasts the fan-out hands out after the page', async () => {
  // The reader read 5-0..9-0; publishes trimmed the stream to 8-0..10-0 (cap 3); the
  // client comes back after 1-0. 5-0 reaches it (queued) while its page is read; 6-0
  // and 7-0, trimmed, reach it after the page went out.
  const got = await comeBackMidPage([5, 6, 7, 8, 9], [8, 9, 10], '1-0');
  assertAccounted(got, 1, 11);
  assert.deepEqual(got, ['gap 1-0..5-0', '5-0', 'gap 5-0..8-0', '8-0', '9-0', '10-0', '11-0']);
});

test('a client ahead of a lagging reader, the stream trimmed past its last_bseq: the live feed brings the rest, no gap', async () => {
  // The reader hands out 5-0..9-0; the client had everything up to 6-0; the stream
  // keeps 9-0..11-0. The fan-out offers this connection every broadcast from 5-0 on.
  const got = await comeBackMidPage([5, 6, 7, 8, 9], [9, 10, 11], '6-0');
  assertAccounted(got, 6, 12);
  assert.deepEqual(got, ['7-0', '8-0', '9-0', '10-0', '11-0', '12-0']);
});

test('a stream trimmed past where the live feed began: what the catch-up would read comes live, a gap only for what it does not bring', async () => {
  // The reader hands out 5-0..9-0 when the client comes back after 1-0; publishes
  // trimmed the stream through 12-0 (it keeps 13-0..15-0): the reader loses 10-0..12-0.
  const got = await comeBackMidPage([5, 6, 7, 8, 9], [13, 14, 15], '1-0');
  assertAccounted(got, 1, 16);
  assert.deepEqual(got, ['gap 1-0..5-0', '5-0', '6-0', '7-0', '8-0', '9-0', 'gap 9-0..13-0', '13-0', '14-0', '15-0', '16-0']);
});
