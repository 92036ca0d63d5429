/**
 * Broadcast fan-out on one node (DESIGN.md §8): each broadcast goes to this node's own
 * connections whose tags match, its frame serialised once for all of them. Sending
 * proceeds in chunks that yield to the event loop between them, under a per-node rate
 * limit in frames per second (the `limiter` package's token bucket), so a broadcast to
 * many connections never stalls live inbox delivery.
 *
 * A batch of broadcasts (what one read of the stream returned: one, or a burst) goes
 * out connection by connection: each connection gets all of the batch's broadcasts
 * for it at once, in order, written to its socket together (one system call, not one
 * per frame: see {@link BroadcastTarget.offerBroadcasts}). For a burst this is what
 * costs the most — bench:broadcast measured ~half of the fan-out's CPU in `writev`
 * when every frame was written on its own.
 */
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { RateLimiter } from 'limiter';
import type { LostRange } from '../streams/follower.js';
import { isExpired, type BroadcastEntry } from './broadcast-stream.js';
import { matchesFilter } from './filter.js';
import type { BroadcastTarget } from './subscription.js';

/**
 * Longest run of writes between two yields to the event loop, ms. Live delivery of an
 * inbox message takes several turns of the loop (request, store, Redis, fetch, send),
 * and each may wait behind one run: a chunk of 500 single frames ran ~5 ms here, which
 * bench:broadcast's live-delivery case (then a test) saw as tens of ms added to the
 * inbox p99 during broadcasts; test/broadcast/fanout.test.ts checks each yield.
 */
const SLICE_MS = 1;

/** Options of {@link BroadcastFanout}. */
export interface FanoutOptions {
  /** Frames per second this node may send to broadcast receivers. */
  readonly framesPerSecond: number;
  /** Frames sent between two yields to the event loop (at most; see the constructor). */
  readonly chunkFrames: number;
  /**
   * Most bytes of broadcasts written to one socket in one go, then a yield: a burst of
   * large broadcasts (one stream read holds up to 200 of up to 64 KiB) would otherwise
   * land on every socket at once, past the hard cap, and close even fast clients 4009.
   */
  readonly maxBatchBytes: number;
  /**
   * Called after each chunk with the frames it wrote: how the fan-out chunked a batch
   * (tests). The frame metric is counted where every frame is written, per connection
   * (ws-connection.ts `sendFrames`), not here.
   */
  readonly onSent?: (frames: number) => void;
  /**
   * The node reader's position (BroadcastReader `position`): the last bseq it handed
   * out, or is handing out; every newer one is offered to the receivers there are then.
   */
  readonly position?: () => string;
}

/** The node's broadcast receivers and the loop that feeds them. */
export class BroadcastFanout {
  readonly #targets = new Set<BroadcastTarget>();
  readonly #limiter: RateLimiter;
  readonly #chunk: number;
  readonly #onSent: ((frames: number) => void) | undefined;
  readonly #maxBatchBytes: number;
  readonly #position: (() => string) | undefined;

  constructor(opts: FanoutOptions) {
    this.#maxBatchBytes = opts.maxBatchBytes;
    const perTwentieth = Math.floor(opts.framesPerSecond / 20);
    // A chunk is at most a twentieth of a second's allowance, and the bucket holds a
    // twentieth of a second's allowance (at least one chunk), refilled at the rate:
    // frames go out smoothly (at a low rate, a chunk every 50 ms) rather than a
    // second's allowance at once and then nothing.
    this.#chunk = Math.max(1, Math.min(opts.chunkFrames, perTwentieth));
    const bucket = Math.max(this.#chunk, perTwentieth);
    this.#limiter = new RateLimiter({ tokensPerInterval: bucket, interval: (bucket * 1000) / opts.framesPerSecond });
    this.#onSent = opts.onSent;
    this.#position = opts.position;
  }

  /** Receivers on this node. */
  get size(): number {
    return this.#targets.size;
  }

  /**
   * Adds a receiver. It is offered every broadcast newer than the returned position
   * (the last one the reader handed out, whose batch may be going out now without
   * it): older ones it gets only from the stream (a catch-up).
   * @returns that position, a bseq (`0-0` without {@link FanoutOptions.position})
   */
  add(target: BroadcastTarget): string {
    this.#targets.add(target);
    return this.#position?.() ?? '0-0';
  }

  remove(target: BroadcastTarget): void {
    this.#targets.delete(target);
  }

  /**
   * Tells every receiver that the node's reader lost broadcasts (trimmed before it read
   * them), in their place: after the batches before and ahead of those after. One
   * frame each, under the rate limit like any other.
   */
  async deliverLost(range: LostRange): Promise<void> {
    const targets = [...this.#targets];
    for (let i = 0; i < targets.length; i += this.#chunk) {
      const chunk = targets.slice(i, i + this.#chunk);
      if (i > 0) await yieldToLoop();
      await this.#limiter.removeTokens(chunk.length);
      for (const target of chunk) target.offerLost(range);
      this.#onSent?.(chunk.length);
    }
  }

  /**
   * Sends a batch of entries (in stream order) to every receiver whose tags match
   * each. Each receiver gets its matching entries in order; resolves once all went out.
   * An entry whose `ttl` ends before its turn comes (the rate limit held it) is sent to
   * no one from then on.
   */
  async deliver(entries: readonly BroadcastEntry[]): Promise<void> {
    // Groups of at most maxBatchBytes (at least one entry each), one after the other:
    // sockets drain between them.
    let start = 0;
    while (start < entries.length) {
      let end = start;
      let bytes = 0;
      do {
        bytes += (entries[end] as BroadcastEntry).frame.length;
        end += 1;
      } while (end < entries.length && bytes + (entries[end] as BroadcastEntry).frame.length <= this.#maxBatchBytes);
      if (start > 0) await yieldToLoop();
      await this.#deliverGroup(entries.slice(start, end));
      start = end;
    }
  }

  async #deliverGroup(entries: readonly BroadcastEntry[]): Promise<void> {
    if (entries.length === 0) return;
    // A snapshot: receivers that leave meanwhile are skipped by their own state;
    // those that join meanwhile get none of this batch (they connected after it).
    const targets = [...this.#targets];
    const filtered = entries.some((e) => e.filter !== undefined);
    /** Receivers and their entries for the chunk being gathered. */
    let chunk: Array<[BroadcastTarget, readonly BroadcastEntry[]]> = [];
    let frames = 0;
    for (const target of targets) {
      let mine = filtered ? entries.filter((e) => matchesFilter(e.filter, target.tags)) : entries;
      if (mine.length === 0) continue;
      // A receiver's entries go in one chunk, written together, unless they alone are
      // over the budget (a low rate): then in pieces, in order.
      if (frames > 0 && frames + mine.length > this.#chunk) {
        await this.#send(chunk, frames);
        chunk = [];
        frames = 0;
        await yieldToLoop();
      }
      while (mine.length > this.#chunk) {
        await this.#send([[target, mine.slice(0, this.#chunk)]], this.#chunk);
        mine = mine.slice(this.#chunk);
        await yieldToLoop();
      }
      chunk.push([target, mine]);
      frames += mine.length;
    }
    if (frames > 0) await this.#send(chunk, frames);
  }

  /**
   * Takes the chunk's tokens, then writes it, yielding whenever a slice of it ran
   * {@link SLICE_MS}; entries whose `ttl` has ended by then are left out.
   */
  async #send(chunk: ReadonlyArray<[BroadcastTarget, readonly BroadcastEntry[]]>, frames: number): Promise<void> {
    await this.#limiter.removeTokens(frames);
    let sliceStart = performance.now();
    /** When the first of the chunk's entries lapses: until then none is checked on its own. */
    let lapses = Number.POSITIVE_INFINITY;
    for (const [, mine] of chunk) for (const e of mine) if (e.expiresAt !== undefined && e.expiresAt < lapses) lapses = e.expiresAt;
    for (const [target, all] of chunk) {
      const now = lapses === Number.POSITIVE_INFINITY ? 0 : Date.now();
      const mine = now < lapses ? all : all.filter((e) => !isExpired(e, now));
      if (mine.length > 0) target.offerBroadcasts(mine);
      if (performance.now() - sliceStart >= SLICE_MS) {
        await yieldToLoop();
        sliceStart = performance.now();
      }
    }
    this.#onSent?.(frames);
  }
}
