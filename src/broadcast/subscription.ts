/**
 * One connection's broadcast feed (DESIGN.md §6, §8): the broadcasts matching its JWT
 * tags, live, and — when it connected with `last_bseq` — first the ones it missed that
 * are still retained. Broadcasts are live and at-most-once with a short catch-up.
 *
 * What a reconnecting client is told, as for inboxes (DESIGN.md §6):
 * - `last_bseq` older than what the stream still retains (trimmed past it):
 *   `{"t":"gap","stream":"broadcast","from":"<last_bseq>","to":"<first retained bseq>"}`
 *   — broadcasts after `from` and before `to` (both exclusive) are gone; the retained
 *   ones follow. A `last_bseq` that was itself the newest entry trimmed gets no `gap`:
 *   nothing after it is missing. The same holds between two catch-up pages: when
 *   publishes trimmed the stream past the last entry sent meanwhile, a `gap` from it
 *   to the first retained entry comes before the next page.
 * - `last_bseq` the stream cannot have held: beyond its last ID, or between the newest
 *   trimmed ID and the first retained one (the stream was lost and recreated, e.g.
 *   Redis restarted without persistence or was flushed, and has new entries since):
 *   `{"t":"reset","stream":"broadcast","bseq":"<last bseq or 0-0>"}`, then every
 *   retained broadcast.
 * - The stream's key holding another type than a stream (an operator's `SET`): not a
 *   lost stream, so no `reset`; the catch-up fails as when Redis is down (an `error`
 *   frame, here INTERNAL naming the broadcast stream, and, when `last_bseq` is behind
 *   where the live feed began, a `gap` from it before the next broadcast sent), until
 *   an operator deletes or repairs the key (src/redis/wrong-type.ts, src/streams/lua/stream-bounds-2.lua).
 * - Live, when the node's reader fell so far behind that broadcasts were trimmed
 *   before it read them (a burst past the stream's cap while the fan-out waited on its
 *   rate limit): the same `gap`, from the last broadcast the reader handed out to the
 *   first it read after the loss, in their place among the live broadcasts.
 */
import { compareStreamIds, normalizeStreamId } from '../streams/stream-id.js';
import { StreamFollower, type FollowerSink, type LostRange } from '../streams/follower.js';
import { isExpired, type BroadcastBounds, type BroadcastEntry, type BroadcastStream } from './broadcast-stream.js';
import { matchesFilter } from './filter.js';
import type { FrameType } from '../delivery/frames.js';
import type { BroadcastFanout } from './fanout.js';

/** Entries per catch-up read. */
const CATCH_UP_PAGE = 200;

/**
 * Where each catching-up feed joined the fan-out ({@link BroadcastSubscription.join}):
 * its catch-up's `liveFrom` ({@link BroadcastSubscription.resume}); a feed in it has no
 * {@link BroadcastSubscription.startedAfter}.
 */
const liveFroms = new WeakMap<BroadcastSubscription, string>();

/** The tags of every connection whose token has none: one set for all of them, never written. */
const NO_TAGS: ReadonlySet<string> = new Set();

/**
 * A connection's JWT `tags` as the set {@link BroadcastTarget.tags} holds: the shared
 * empty set when there are none (most connections; an empty `Set` costs ~250 bytes of
 * heap per connection, bench:e2e case c).
 */
export function tagSet(tags: readonly string[]): ReadonlySet<string> {
  return tags.length === 0 ? NO_TAGS : new Set(tags);
}

/** A receiver of live broadcasts (the fan-out's view of a connection). */
export interface BroadcastTarget {
  readonly tags: ReadonlySet<string>;
  /** Live broadcasts, in stream order, whose filters the fan-out matched against {@link tags}. */
  offerBroadcasts(entries: readonly BroadcastEntry[]): void;
  /** Broadcasts the node's reader lost (trimmed before it read them), in their place among the live ones. */
  offerLost(range: LostRange): void;
}

/** Where a feed writes its frames: the connection. */
export interface FrameSink {
  /**
   * Writes one text frame (a Buffer holds its UTF-8 bytes) of type `t` (counted by type),
   * answering whether it did (not to a connection closing).
   */
  send(frame: string | Buffer, t: FrameType): boolean;
  /** Counts a broadcast `gap` frame {@link send} wrote (metrics; a `bcast` pays nothing for it); absent: not counted. */
  countGap?(): void;
  /** Writes the `bcast` frames of several entries, in order, together where the socket allows. */
  sendFrames(entries: readonly { readonly frame: Buffer }[]): void;
  /** Undefined while the connection takes more; else resolves when it does (see WsConnection.whenWritable). */
  whenWritable(): Promise<void> | undefined;
}

/**
 * The feed of one connection. It is its follower's sink ({@link sendEntry},
 * {@link sendGap}) rather than handing it two closures: one feed per connection, and
 * bench:e2e case (c) counts every byte of an idle one (~160 bytes of heap).
 */
export class BroadcastSubscription implements BroadcastTarget, FollowerSink<BroadcastEntry> {
  readonly tags: ReadonlySet<string>;
  readonly #sink: FrameSink;
  readonly #follower: StreamFollower<BroadcastEntry>;
  /**
   * Live and past any catch-up: live broadcasts go straight to the sink. This path runs
   * for every connection on every broadcast, so it touches only this object and the
   * connection (bench:broadcast: going through the follower and two closures per frame
   * showed as ~10 % of the fan-out's CPU samples).
   */
  #live = false;

  /** Starts held: live broadcasts queue until {@link resume} (after `welcome`). */
  constructor(tags: ReadonlySet<string>, sink: FrameSink) {
    this.tags = tags;
    this.#sink = sink;
    this.#follower = new StreamFollower(this);
    this.#follower.hold();
  }

  /**
   * Writes a broadcast its follower hands out (caught up, or live and queued meanwhile);
   * for the follower only. Catch-up reads are not filtered by the fan-out: matched here.
   */
  sendEntry(e: BroadcastEntry): void {
    // A broadcast whose `ttl` ended while the client was away is not sent late.
    if (matchesFilter(e.filter, this.tags) && !isExpired(e, Date.now())) this.#sink.send(e.frame, 'bcast');
  }

  /** Writes the `gap` of broadcasts after `from` and before `to` (both exclusive) its follower tells; for the follower only. */
  sendGap(from: string, to: string): void {
    if (this.#sink.send(gapFrame(from, to), 'gap')) this.#sink.countGap?.();
  }

  /**
   * Joins the node's fan-out (held until {@link resume}). A feed that will catch up
   * notes where the fan-out was then (BroadcastFanout `add`): every broadcast newer
   * than it comes live, so the catch-up reads the history only up to it. Kept aside,
   * not in a field: bench:e2e case c counts every byte of an idle connection.
   */
  join(fanout: BroadcastFanout, catchingUp: boolean): void {
    const position = fanout.add(this);
    if (catchingUp) liveFroms.set(this, position);
    else this.#follower.startAfter(position);
  }

  /**
   * Where a feed that joined without catching up starts: the reader's position when it
   * joined ({@link join}). Every broadcast after it that matches {@link tags} is offered
   * to this feed (or told lost with a `gap`), none at or before it is sent, so it is
   * what `welcome` gives a client without `last_bseq` to keep (`bseq`): a reconnect
   * with it as `last_bseq` catches up exactly what this connection did not get.
   * Read before {@link resume} (while held): undefined for a feed catching up.
   */
  get startedAfter(): string | undefined {
    return liveFroms.has(this) ? undefined : this.#follower.position;
  }

  /** Live broadcasts from the node's reader (already matched by the fan-out). */
  offerBroadcasts(entries: readonly BroadcastEntry[]): void {
    if (this.#live) {
      this.#sink.sendFrames(entries);
      return;
    }
    for (const e of entries) this.#follower.offer(e);
    this.#live = this.#follower.settled;
  }

  /**
   * The connection is closing: a catch-up in progress stops reading the stream (else,
   * woken by the close, it read the rest of the history for nobody); with `fanout`
   * (the socket closed), it also leaves the fan-out.
   */
  stop(fanout?: BroadcastFanout): void {
    this.#follower.stop();
    fanout?.remove(this);
  }

  offerLost(range: LostRange): void {
    // Live: it was handed every broadcast up to `range.after`.
    if (this.#live) this.sendGap(range.after, range.before);
    else this.#follower.offerLost(range);
  }

  /**
   * Starts the feed: live only when `lastBseq` is undefined; else catch up first.
   * A failed catch-up read (Redis down) ends the catch-up; live broadcasts still flow.
   * @throws PixiuError UNAVAILABLE when Redis fails, INTERNAL when the stream's key
   *   holds another type (after switching to live)
   */
  async resume(stream: BroadcastStream, lastBseq: string | undefined): Promise<void> {
    if (lastBseq === undefined) {
      this.#follower.release();
      return;
    }
    let after = normalizeStreamId(lastBseq);
    /** After a `reset`: every retained entry follows, with no `gap` before them. */
    let reset = false;
    try {
      const bounds = await stream.bounds();
      // No stream (none posted yet, or it was lost): `0-0`, what a `reset` of an empty
      // stream gives, has missed nothing; any other bseq was of a stream that is gone.
      if (bounds.last === undefined && after === '0-0') {
        this.#follower.release();
        return;
      }
      if (bounds.last === undefined || compareStreamIds(after, bounds.last) > 0 || lostBefore(after, bounds)) {
        this.#sink.send(JSON.stringify({ t: 'reset', stream: 'broadcast', bseq: bounds.last ?? '0-0' }), 'reset');
        after = '0-0';
        reset = true;
      }
    } catch (err) {
      // The retained broadcasts after `last_bseq` cannot be read: a gap from it before
      // the next broadcast sent, not a silent skip.
      this.#follower.releaseUnread(after, liveFroms.get(this));
      throw err;
    }
    // Each page is read with the stream's bounds at that moment: trimmed past the
    // cursor — before the first page, or between two pages while publishes trim the
    // stream — is a `gap` to the next broadcast sent (the follower tells it, knowing
    // what came live meanwhile), never a silent skip.
    await this.#follower.catchUp(after, async (cursor) => {
      const { entries, bounds, readUpTo } = await stream.rangeWithBounds(cursor, CATCH_UP_PAGE);
      // After a `reset`, the first page is the whole stream: nothing before it is missed.
      const lastTrimmed = reset && cursor === '0-0' ? undefined : bounds.maxDeleted;
      // Malformed entries (left out, logged by the node's reader) are read past, not stopped at.
      return { entries, lastTrimmed, readUpTo };
    }, () => this.#sink.whenWritable(), liveFroms.get(this));
  }
}

/**
 * True when `lastBseq` lies after everything trimmed and before the first retained
 * entry: no entry of this stream ever had that ID (trimming removes from the front, so
 * the newest trimmed ID is the one just before the first retained), so the stream the
 * client read from was lost and this one was created since.
 */
function lostBefore(lastBseq: string, bounds: BroadcastBounds): boolean {
  return bounds.first !== undefined && compareStreamIds(lastBseq, bounds.maxDeleted) > 0 && compareStreamIds(lastBseq, bounds.first) < 0;
}

/** The `gap` frame of broadcasts after `from` and before `to` (both exclusive). */
function gapFrame(from: string, to: string): string {
  return JSON.stringify({ t: 'gap', stream: 'broadcast', from, to });
}
