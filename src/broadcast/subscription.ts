/**
 * One connection's broadcast feed (DESIGN.md §6, §8): the broadcasts matching its JWT
 * tags, live, and — when it connected with `last_bseq` — first the ones it missed that
 * are still retained. Broadcasts are live and at-most-once with a short catch-up.
 *
 * What a reconnecting client is told, as for inboxes (DESIGN.md §6):
 * - `last_bseq` older than what the stream still retains (trimmed past it):
 *   `{"t":"gap","stream":"broadcast","from":"<last_bseq>","to":"<first retained bseq>"}`
 *   — broadcasts after `from` and before `to` (both exclusive) are gone; the retained
 *   ones follow;
 * - `last_bseq` beyond anything the stream has (it was lost, e.g. Redis restarted
 *   without persistence): `{"t":"reset","stream":"broadcast","bseq":"<last bseq or 0-0>"}`,
 *   then every retained broadcast.
 */
import { compareStreamIds } from '../streams/stream-id.js';
import { StreamFollower } from '../streams/follower.js';
import type { BroadcastEntry, BroadcastStream } from './broadcast-stream.js';
import { matchesFilter } from './filter.js';

/** Entries per catch-up read. */
const CATCH_UP_PAGE = 200;

/** A receiver of live broadcasts (the fan-out's view of a connection). */
export interface BroadcastTarget {
  readonly tags: ReadonlySet<string>;
  offerBroadcast(entry: BroadcastEntry): void;
}

/** The feed of one connection. */
export class BroadcastSubscription implements BroadcastTarget {
  readonly tags: ReadonlySet<string>;
  readonly #send: (text: string) => void;
  readonly #follower: StreamFollower<BroadcastEntry>;

  /** Starts held: live broadcasts queue until {@link resume} (after `welcome`). */
  constructor(tags: ReadonlySet<string>, send: (text: string) => void) {
    this.tags = tags;
    this.#send = send;
    this.#follower = new StreamFollower((e) => {
      if (matchesFilter(e.filter, this.tags)) send(e.frame);
    });
    this.#follower.hold();
  }

  /** The last bseq sent or skipped, if any. */
  get last(): string | undefined {
    return this.#follower.last;
  }

  /** A live broadcast from the node's reader. */
  offerBroadcast(entry: BroadcastEntry): void {
    this.#follower.offer(entry);
  }

  /**
   * Starts the feed: live only when `lastBseq` is undefined; else catch up first.
   * A failed catch-up read (Redis down) ends the catch-up; live broadcasts still flow.
   * @throws PixiuError UNAVAILABLE when Redis fails (after switching to live)
   */
  async resume(stream: BroadcastStream, lastBseq: string | undefined): Promise<void> {
    if (lastBseq === undefined) {
      this.#follower.release();
      return;
    }
    let after = lastBseq;
    try {
      const bounds = await stream.bounds();
      if (bounds.last === undefined || compareStreamIds(lastBseq, bounds.last) > 0) {
        this.#send(JSON.stringify({ t: 'reset', stream: 'broadcast', bseq: bounds.last ?? '0-0' }));
        after = '0-0';
      } else if (compareStreamIds(bounds.maxDeleted, lastBseq) > 0) {
        this.#send(JSON.stringify({ t: 'gap', stream: 'broadcast', from: lastBseq, to: bounds.first ?? bounds.last }));
      }
    } catch (err) {
      this.#follower.release();
      throw err;
    }
    await this.#follower.catchUp(after, (a) => stream.range(a, CATCH_UP_PAGE));
  }
}
