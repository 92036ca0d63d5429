/**
 * The shapes a stream follower (follower.ts) works with: what it forwards, where it
 * sends it, the catch-up pages it reads and the losses the node's reader tells it of
 * (DESIGN.md §8), and its queue's bound.
 */
/** What a follower forwards: anything with a stream entry ID. */
export interface StreamEntry {
  readonly id: string;
}

/** Where a follower writes: the connection's feed (its frames, counted by type). */
export interface FollowerSink<E extends StreamEntry> {
  /** Writes one entry to the connection. */
  sendEntry(entry: E): void;
  /**
   * Tells the connection that entries after `from` and before `to` (both exclusive) are
   * gone (a {@link LostRange} it had not been sent all of); absent: nothing is told.
   */
  sendGap?(from: string, to: string): void;
}

/** One page of a catch-up, with what the stream says it trimmed. */
export interface CatchUpPage<E extends StreamEntry> {
  /** Entries after the page's start, oldest first; empty when none. */
  readonly entries: readonly E[];
  /**
   * The highest ID trimmed from the stream when the page was read (`0-0`: none);
   * undefined: not known (no gap is ever told). A caller that gives it offers a
   * contiguous live feed: from its first item on, every later entry (or its loss).
   */
  readonly lastTrimmed?: string | undefined;
  /**
   * The ID of the last entry the page read, those left out of `entries` included (an
   * entry another writer left malformed): the next page is read after it. Undefined:
   * after the last of `entries`.
   */
  readonly readUpTo?: string | undefined;
}

/** Reads entries after `afterId` (exclusive): a page, or just its entries (nothing known of trimming). */
export type PageReader<E extends StreamEntry> = (afterId: string) => Promise<readonly E[] | CatchUpPage<E>>;

/**
 * Asked after each entry a catch-up sends: undefined when the connection takes more
 * now, else a promise that resolves when it does (its backpressure pause ended, or it
 * closed). See WsConnection.whenWritable.
 */
export type WhenWritable = () => Promise<void> | undefined;

/**
 * Entries of the stream the node's reader lost: trimmed before it read them. Every
 * entry after `after` and before `before` (both exclusive) it never handed out; the
 * newest of them is at most `lastLost`.
 */
export interface LostRange {
  /** The last entry the reader handed out before the loss. */
  readonly after: string;
  /** The first entry the reader read after it (the first retained then). */
  readonly before: string;
  /** The highest ID trimmed when the loss was seen (the stream's max deleted ID). */
  readonly lastLost: string;
}

/** Most live entries queued during one catch-up; past it the oldest are dropped, and told as a gap unless the catch-up sends them. */
export const MAX_CATCH_UP_QUEUE = 10_000;
