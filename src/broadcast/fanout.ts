/**
 * Broadcast fan-out on one node (DESIGN.md §8): each broadcast goes to this node's own
 * connections whose tags match, its frame serialised once for all of them. Sending
 * proceeds in chunks that yield to the event loop between them, under a per-node rate
 * limit in frames per second (the `limiter` package's token bucket), so a broadcast to
 * many connections never stalls live inbox delivery.
 */
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { RateLimiter } from 'limiter';
import type { BroadcastEntry } from './broadcast-stream.js';
import { matchesFilter } from './filter.js';
import type { BroadcastTarget } from './subscription.js';

/** Options of {@link BroadcastFanout}. */
export interface FanoutOptions {
  /** Frames per second this node may send to broadcast receivers. */
  readonly framesPerSecond: number;
  /** Connections handled between two yields to the event loop. */
  readonly chunkSize: number;
  /** Counts frames sent (metrics). */
  readonly onSent?: (frames: number) => void;
}

/** The node's broadcast receivers and the loop that feeds them. */
export class BroadcastFanout {
  readonly #targets = new Set<BroadcastTarget>();
  readonly #limiter: RateLimiter;
  readonly #chunk: number;
  readonly #onSent: ((frames: number) => void) | undefined;

  constructor(opts: FanoutOptions) {
    this.#limiter = new RateLimiter({ tokensPerInterval: opts.framesPerSecond, interval: 'second' });
    // A chunk may never ask for more tokens than the bucket holds.
    this.#chunk = Math.max(1, Math.min(opts.chunkSize, opts.framesPerSecond));
    this.#onSent = opts.onSent;
  }

  /** Receivers on this node. */
  get size(): number {
    return this.#targets.size;
  }

  add(target: BroadcastTarget): void {
    this.#targets.add(target);
  }

  remove(target: BroadcastTarget): void {
    this.#targets.delete(target);
  }

  /** Sends each entry, in order, to every matching receiver. */
  async deliver(entries: readonly BroadcastEntry[]): Promise<void> {
    for (const entry of entries) {
      // A snapshot: receivers that leave meanwhile are skipped by their own state.
      const targets = [...this.#targets].filter((t) => matchesFilter(entry.filter, t.tags));
      for (let i = 0; i < targets.length; i += this.#chunk) {
        const chunk = targets.slice(i, i + this.#chunk);
        await this.#limiter.removeTokens(chunk.length);
        for (const t of chunk) t.offerBroadcast(entry);
        this.#onSent?.(chunk.length);
        if (i + this.#chunk < targets.length) await yieldToLoop();
      }
    }
  }
}
