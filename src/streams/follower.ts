/**
 * Following a Redis stream for one connection: first a catch-up read from where the
 * client says it was, then the live entries the node's reader hands out, in ID order
 * and each at most once. Used for broadcasts (`last_bseq`) and channel histories
 * (`sub` with `since`), both live and at-most-once with a short catch-up (DESIGN.md §8).
 *
 * The race it closes: a live entry can be read by the node's reader while this
 * connection is still catching up. Live entries that arrive during the catch-up are
 * queued, and merged in ID order with what the catch-up reads: before each entry of a
 * page goes out, the queued ones older than it go first. A history trimmed meanwhile
 * past queued entries (a short cap, a catch-up held back by a slow client) can make a
 * page jump over them; without the merge they were dropped as "already sent" (a fresh
 * review's finding: live publications after a `sub` lost without a signal). When the
 * catch-up reads come back empty the rest of the queue is flushed, skipping what the
 * catch-up already sent. JavaScript runs one thing at a time, so no entry falls
 * between the last catch-up read and the switch to live.
 *
 * When where the live feed began is known (`liveFrom`: every entry newer than it is
 * offered live, or told lost by the node's reader as a {@link LostRange}), the
 * catch-up reads the history only up to there: past it, the live feed brings
 * everything in order, and its losses are told in their place. (Read further, a page
 * could jump over entries a lagging reader was still to hand out or to report lost,
 * and they were skipped without a gap: a fresh tester's finding.) What the history
 * itself lost before that point (trimmed past the cursor before a page was read) is
 * told with a gap where the live feed does not bring it (`#tellTrimmed`).
 *
 * Once a live entry newer than everything the catch-up sent has gone out, the ones
 * after it are newer still (the node's reader hands entries out in ID order), so live
 * entries are no longer compared: a broadcast runs `offer` once per connection, and
 * the comparison was a measurable part of the fan-out's cost per frame.
 *
 * Entries the node's reader lost (trimmed from the stream before it read them) come as
 * a {@link LostRange}, in their place among the live entries: a connection that had
 * not been sent everything up to the last one lost is told with a gap, never skipped
 * silently.
 */
import { compareStreamIds } from './stream-id.js';
import { MAX_CATCH_UP_QUEUE, type StreamEntry, type FollowerSink, type CatchUpPage, type PageReader, type WhenWritable, type LostRange } from './follower-types.js';

export { MAX_CATCH_UP_QUEUE } from './follower-types.js';
export type { StreamEntry, FollowerSink, CatchUpPage, PageReader, WhenWritable, LostRange } from './follower-types.js';

/** One connection's position in one stream. */
export class StreamFollower<E extends StreamEntry> {
  readonly #sink: FollowerSink<E>;
  /** ID of the last entry sent; undefined: nothing yet (live from now). */
  #last: string | undefined;
  #catchingUp = false;
  /** The connection is gone ({@link stop}): a catch-up reads and sends nothing more. */
  #stopped = false;
  /** Live entries must be compared with {@link #last}: a catch-up may have sent them already. */
  #checkOrder = false;
  #queue: (E | LostMark)[] = [];
  /**
   * The newest ID dropped from a full queue ({@link MAX_CATCH_UP_QUEUE}) and not told
   * yet; undefined: none. Told as a gap before the next queued item goes out, unless
   * what was sent by then covers it (a catch-up page read it from the stream).
   */
  #droppedUpTo: string | undefined;
  /**
   * The entries after this ID a catch-up had not sent are not sent (its read failed, or
   * the stream was trimmed past them): told as a gap before the next entry (or loss)
   * that goes out; undefined: none.
   */
  #unreadAfter: string | undefined;

  /**
   * @param sink where entries and gaps are written: an object of the connection's
   *   (broadcast/subscription.ts is its own), so that a follower per connection makes
   *   no closures (bench:e2e case c counts every byte of an idle connection)
   */
  constructor(sink: FollowerSink<E>) {
    this.#sink = sink;
  }

  /**
   * Live, and past what a catch-up sent: every entry offered from now on is new, so
   * a caller may hand live entries straight to the connection instead (in ID order).
   */
  get settled(): boolean {
    return !this.#catchingUp && !this.#checkOrder;
  }

  /** A live entry from the node's reader (entries come in ID order). */
  offer(entry: E): void {
    if (this.#catchingUp) {
      this.#enqueue(entry);
      return;
    }
    if (this.#checkOrder) {
      const before = this.#last;
      this.#forward(entry);
      // It went out, so it is newer than all the catch-up sent; so will the next ones be.
      if (this.#last !== before) this.#checkOrder = false;
      return;
    }
    this.#last = entry.id;
    this.#sink.sendEntry(entry);
  }

  /**
   * An entry read again from the stream after the node's reader lost some (a channel's
   * refill once its Pub/Sub connection is back): sent only when newer than the last one
   * sent; during a catch-up, queued in its place by ID. Offer them in ID order, before
   * any live entry newer than them.
   */
  offerRecovered(entry: E): void {
    if (this.#catchingUp) this.#enqueueInOrder(entry);
    else this.#forward(entry);
  }

  /**
   * Entries the node's reader lost, in their place among the live entries: a gap
   * goes out unless everything up to the last one lost was sent already (a catch-up
   * read them from the stream).
   */
  offerLost(range: LostRange): void {
    if (this.#catchingUp) {
      this.#enqueue(new LostMark(range));
      return;
    }
    this.#forwardLost(range);
  }

  /** Queues live entries until {@link catchUp} or {@link release} (before the connection's first frame). */
  hold(): void {
    this.#catchingUp = true;
  }

  /**
   * The connection closed: a catch-up running stops before its next read or entry
   * (else, woken from its backpressure wait by the close, it read the rest of the
   * history from Redis for nobody), and nothing queued is sent.
   */
  stop(): void {
    this.#stopped = true;
    this.#queue = [];
  }

  /**
   * The connection takes the stream live from after `id` (where the node's reader was
   * when it joined: src/broadcast/subscription.ts), with no catch-up: nothing at or
   * before `id` is sent — an entry the reader read before the join and was still
   * handing out when the connection joined, a loss all before it — so `id` is a
   * position the client may keep and resume from (`welcome`'s `bseq`:
   * docs/protocol.md); a gap for live entries a full queue dropped
   * before its first frame starts there, not at the stream's beginning. Call it before
   * the first entry goes out (while held).
   */
  startAfter(id: string): void {
    this.#last = id;
    // Live entries are compared with it until one newer went out.
    this.#checkOrder = true;
  }

  /**
   * The ID of the last entry sent, or where the connection started ({@link startAfter},
   * a catch-up's `afterId`); undefined: neither yet.
   */
  get position(): string | undefined {
    return this.#last;
  }

  /** Ends a {@link hold} without a catch-up: live from here (queued entries go out now). */
  release(): void {
    this.#catchingUp = false;
    this.#flush();
  }

  /**
   * Ends a {@link hold} when a catch-up from `afterId` could not even begin (its first
   * read failed): live from here, nothing at or before `afterId` sent again, and a gap
   * from `afterId` before the next entry that goes out (what it skipped is told),
   * unless `afterId` is at or past `liveFrom` (the live feed brings everything after it).
   */
  releaseUnread(afterId: string, liveFrom?: string): void {
    this.#last = afterId;
    this.#checkOrder = true;
    // At or past where the live feed began, nothing was left unread: no gap to tell.
    if (liveFrom === undefined || compareStreamIds(afterId, liveFrom) < 0) this.#unreadAfter = afterId;
    this.release();
  }

  /**
   * Sends what was appended after `afterId`, page by page, then switches to live.
   * A read that fails ends the catch-up early (at-most-once: what it could not read
   * is not sent) and rethrows after switching to live.
   * @param whenWritable asked after each entry sent, and again after each wait: the
   *   catch-up waits while the connection is paused by backpressure (DESIGN.md §5), so a long catch-up goes at
   *   the client's pace instead of queueing past the hard cap
   * @param liveFrom where the live feed began for this connection: every entry newer
   *   than it is offered live or told lost, so the history is read only up to it;
   *   undefined when not known (the history is read to its end)
   */
  async catchUp(afterId: string, read: PageReader<E>, whenWritable?: WhenWritable, liveFrom?: string): Promise<void> {
    this.#catchingUp = true;
    this.#checkOrder = true;
    this.#last = afterId;
    // The newest ID a page read, sent or left out: a page of entries all left out
    // (malformed) moves the next read past them instead of ending the catch-up there.
    let readUpTo = afterId;
    try {
      for (;;) {
        if (this.#stopped) break;
        const before = newerOf(this.#last ?? afterId, readUpTo);
        // From here on the live feed brings everything (see the module comment).
        if (liveFrom !== undefined && compareStreamIds(before, liveFrom) >= 0) break;
        let answer: Awaited<ReturnType<PageReader<E>>>;
        try {
          answer = await read(before);
        } catch (err) {
          // What it could not read is gone for this connection: told as a gap before
          // the next entry sent (a live one), not skipped silently.
          this.#unreadAfter = before;
          throw err;
        }
        const page: CatchUpPage<E> = isEntryList(answer) ? { entries: answer } : answer;
        if (page.readUpTo !== undefined) readUpTo = newerOf(readUpTo, page.readUpTo);
        // Trimmed past the cursor, where the live feed brings the rest: nothing more to read.
        if (this.#tellTrimmed(before, page, liveFrom)) break;
        for (const entry of page.entries) {
          if (this.#stopped) break;
          this.#drainQueueBefore(entry.id);
          this.#forward(entry);
          // Asked again after each wait: the drain that ended a pause may have paused the
          // connection anew (its next inbox page, cut by bytes) before this goes on.
          for (let paused = whenWritable?.(); paused !== undefined; paused = whenWritable?.()) await paused;
        }
        // Empty, or nothing newer (a reader that is not exclusive): caught up.
        if (newerOf(this.#last ?? afterId, readUpTo) === before) break;
      }
    } finally {
      this.release();
    }
  }

  /**
   * Tells with a gap what the stream lost past `cursor` before `page` was read, where
   * the live feed (contiguous: {@link CatchUpPage.lastTrimmed}) does not bring it. It may
   * begin part-way through the page the reader was handing out at the join and bring
   * some of it after this page: a gap ending at the first queued entry let those be
   * dropped as sent, in no gap, or ended before the cursor (a reviewer's finding). Fed
   * from at or before the cursor, the feed brings the rest: nothing told. Trimmed at or
   * past `liveFrom`, all the stream retains after the cursor comes live: a gap from the
   * cursor before the feed's next item. Else the queued items up to the newest trimmed
   * go out (a gap from the cursor first); until the feed reaches it, what it may still
   * bring up to it is not sent, and a gap before the page's first says so.
   * @returns true when the catch-up ends here: the live feed brings the rest
   */
  #tellTrimmed(cursor: string, page: CatchUpPage<E>, liveFrom: string | undefined): boolean {
    const trimmed = page.lastTrimmed;
    if (trimmed === undefined || compareStreamIds(trimmed, cursor) <= 0) return false;
    if (this.#fedFrom(cursor)) return true;
    this.#unreadAfter ??= cursor; // an older start not told yet is kept
    if (liveFrom !== undefined && compareStreamIds(trimmed, liveFrom) >= 0) return true;
    const sent = this.#drainQueueBefore(trimmed, true);
    // The feed brought an item at or past the newest trimmed ID: it brings nothing older later.
    const reached = this.#queue.length > 0 || (sent instanceof LostMark ? compareStreamIds(sent.range.before, trimmed) > 0 : sent !== undefined && compareStreamIds(sent.id, trimmed) >= 0);
    if (!reached) {
      this.#unreadAfter ??= this.#last;
      this.#last = trimmed;
    }
    return false;
  }

  /** The live feed brings every entry after `id`: it offered (or a full queue dropped) an item at or before it. */
  #fedFrom(id: string): boolean {
    if (this.#droppedUpTo !== undefined && compareStreamIds(this.#droppedUpTo, id) <= 0) return true;
    const head = this.#queue[0];
    return head !== undefined && compareStreamIds(head instanceof LostMark ? head.range.after : head.id, id) <= 0;
  }

  /** Queues a live item; a full queue drops its oldest, noted for a gap ({@link #droppedUpTo}). */
  #enqueue(item: E | LostMark): void {
    if (this.#queue.length >= MAX_CATCH_UP_QUEUE) {
      const dropped = this.#queue.shift() as E | LostMark;
      this.#droppedUpTo = dropped instanceof LostMark ? dropped.range.lastLost : dropped.id;
    }
    this.#queue.push(item);
  }

  /** Queues `entry` after the queued items not newer than it (none with its ID twice). */
  #enqueueInOrder(entry: E): void {
    let at = this.#queue.length;
    for (; at > 0; at--) {
      const item = this.#queue[at - 1] as E | LostMark;
      const order = compareStreamIds(item instanceof LostMark ? item.range.lastLost : item.id, entry.id);
      if (order === 0 && !(item instanceof LostMark)) return;
      if (order <= 0) break;
    }
    this.#queue.splice(at, 0, entry);
    // Full: the oldest is dropped, as #enqueue does.
    if (this.#queue.length > MAX_CATCH_UP_QUEUE) {
      const dropped = this.#queue.shift() as E | LostMark;
      this.#droppedUpTo = dropped instanceof LostMark ? dropped.range.lastLost : dropped.id;
    }
  }

  /**
   * Sends the queued live entries (and losses) older than `id` (or up to it: `inclusive`),
   * in order: see the module comment. Returns the last one sent; undefined: none.
   */
  #drainQueueBefore(id: string, inclusive = false): E | LostMark | undefined {
    let sent: E | LostMark | undefined;
    while (this.#queue.length > 0) {
      const item = this.#queue[0] as E | LostMark;
      const key = item instanceof LostMark ? item.range.lastLost : item.id;
      if (compareStreamIds(key, id) >= (inclusive ? 1 : 0)) break;
      this.#queue.shift();
      this.#forwardQueued(item);
      sent = item;
    }
    return sent;
  }

  #flush(): void {
    const queued = this.#queue;
    this.#queue = [];
    for (const item of queued) this.#forwardQueued(item);
  }

  /** Sends one queued item, after a gap for what a full queue dropped before it (unless already sent). */
  #forwardQueued(item: E | LostMark): void {
    const dropped = this.#droppedUpTo;
    if (dropped !== undefined) {
      this.#droppedUpTo = undefined;
      const next = item instanceof LostMark ? item.range.before : item.id;
      this.#forwardLost({ after: this.#last ?? '0-0', before: next, lastLost: dropped });
    }
    if (item instanceof LostMark) this.#forwardLost(item.range);
    else this.#forward(item);
  }

  #forwardLost(range: LostRange): void {
    const last = this.#last;
    if (last !== undefined && compareStreamIds(last, range.lastLost) >= 0) return;
    const unread = this.#unreadAfter;
    this.#unreadAfter = undefined;
    this.#sink.sendGap?.(unread ?? (last === undefined || compareStreamIds(last, range.after) < 0 ? range.after : last), range.before);
    // Nothing lost is sent later; entries after the range are newer than its last.
    if (last !== undefined) this.#last = range.lastLost;
  }

  /** Sends `entry` unless it is not newer than the last one sent. */
  #forward(entry: E): void {
    if (this.#last !== undefined && compareStreamIds(entry.id, this.#last) <= 0) return;
    const unread = this.#unreadAfter;
    if (unread !== undefined) {
      this.#unreadAfter = undefined;
      this.#sink.sendGap?.(unread, entry.id);
    }
    this.#last = entry.id;
    this.#sink.sendEntry(entry);
  }
}

/** A {@link LostRange} in a follower's queue, told apart from the entries there. */
class LostMark {
  constructor(readonly range: LostRange) {}
}

/** The newer of two stream IDs. */
function newerOf(a: string, b: string): string {
  return compareStreamIds(a, b) >= 0 ? a : b;
}

function isEntryList<E extends StreamEntry>(page: readonly E[] | CatchUpPage<E>): page is readonly E[] {
  return Array.isArray(page);
}
