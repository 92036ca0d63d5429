/**
 * What a channel's refill needs (src/channels/channel-hub.ts; docs/decisions.md
 * "Channels"): once the node's subscriber connection is back, each channel it follows
 * is read again from its history after the earliest position of its local
 * subscribers, its live publications held meanwhile. What the history trimmed before
 * the refill read it is a loss, told to the subscribers in its place
 * ({@link refillLoss}), as the broadcast reader tells its own (a LostRange).
 */
import { HISTORY_PAGE, type ChannelEntry, type ChannelStream, type HistoryPage } from './channel-stream.js';
import type { LostRange } from '../streams/follower.js';
import { compareStreamIds, precedingStreamId } from '../streams/stream-id.js';

/**
 * The waits, ms, between a channel refill's tries while Redis fails its reads (its
 * command connection not back yet, though the subscriber is: a Redis restart); the
 * last is kept. The node's other reads retry on the same scale.
 */
export const REFILL_RETRY_MS = [250, 500, 1000, 2000];
/**
 * How long, ms, a refill's reads are tried again before it gives up on them (the held
 * publications then go out, and what the history held is lost, logged at warn): a
 * Redis that takes the subscriber's connection but fails every read for this long
 * (an ACL that refuses the reads, say) must not hold a channel's live publications
 * back for good.
 */
export const REFILL_GIVE_UP_MS = 30_000;

/** One channel of a refill (ChannelHub `#refill`), carried from one try to the next. */
export interface RefillPlan<S = unknown> {
  readonly channel: string;
  /** The hub's state of the channel (its subscribers and hold). */
  readonly state: S;
  /** The earliest position among its subscribers; undefined: none knows its own (nothing to read). */
  readonly from: string | undefined;
  /** The last publication read and offered (`from` before any): a read tried again starts after it. */
  at: string | undefined;
  /** What the last successful read answered (readHistory): a full hold's drops newer than it are lost. */
  read?: string;
  /** Whether it told a loss already (counted once in the refill's warning). */
  lost: boolean;
}

/** Where a subscriber is in a channel (see ChannelSubscriber). */
interface Positioned {
  positionOf(channel: string): string | undefined;
}

/** A channel's live publications held during a refill, in id order, and the end of the hold. */
export class Hold {
  readonly entries: ChannelEntry[] = [];
  /**
   * The newest id dropped from {@link entries} once they held their bound (the
   * follower's, MAX_CATCH_UP_QUEUE), oldest first; undefined: none. What the refill did
   * not read of them is told lost when the hold ends (channel-hub.ts `#release`).
   */
  droppedUpTo: string | undefined;
  readonly #end: { resolve?: () => void } = {};
  /** Resolves when the hold ends: what it held has been offered. */
  readonly ended = new Promise<void>((resolve) => { this.#end.resolve = resolve; });

  /** Ends the hold (what it held was offered, or nobody here follows the channel any more). */
  end(): void {
    this.#end.resolve?.();
  }
}

/** The earliest position among a channel's subscribers that know theirs; undefined: none does. */
export function earliestPosition(subs: Iterable<Positioned>, channel: string): string | undefined {
  let earliest: string | undefined;
  for (const sub of subs) {
    const at = sub.positionOf(channel);
    if (at !== undefined && (earliest === undefined || compareStreamIds(at, earliest) < 0)) earliest = at;
  }
  return earliest;
}

/** Where a refill's reads go: the publications, and what the history had trimmed. */
export interface RefillFeed {
  /** A publication read, oldest first. */
  entry(entry: ChannelEntry): void;
  /**
   * The page read after `after` found the history trimmed past it: called, and awaited,
   * before the page's entries are handed on (the hub first waits for the live copies of
   * what was published before the read: a barrier).
   */
  trimmed(after: string, page: HistoryPage): void | Promise<void>;
}

/**
 * Reads a channel's history after `from` up to `upTo` (both ids), page by page, and
 * hands each publication to `feed`, oldest first, while `going` says so; a page read
 * when the history had trimmed past where it starts is handed to `feed.trimmed` first,
 * and waited for (each page is read with the history's bounds: ChannelStream `range`).
 * @returns the id of the last entry read: handed to `feed`, or passed over on a page (an
 *   entry another writer left malformed); `from` when none
 * @throws PixiuError UNAVAILABLE when a read fails; what `feed.trimmed` throws
 */
export async function readHistory(stream: ChannelStream, channel: string, from: string, upTo: string,
  going: () => boolean, feed: RefillFeed): Promise<string> {
  let after = from;
  while (compareStreamIds(after, upTo) < 0) {
    const page = await stream.range(channel, after, HISTORY_PAGE);
    if (!going()) return after;
    if (compareStreamIds(page.lastTrimmed, after) > 0) {
      await feed.trimmed(after, page);
      if (!going()) return after;
    }
    for (const entry of page.entries) {
      // Past `upTo`: the entries of this page handed on before it were read.
      if (compareStreamIds(entry.id, upTo) > 0) return after;
      feed.entry(entry);
      after = entry.id;
    }
    if (page.readUpTo === undefined) return after;
    after = page.readUpTo;
  }
  return after;
}

/**
 * The loss a refill page tells (see {@link RefillFeed.trimmed}): the publications after
 * `after` the history trimmed before the page was read, less those the hold has (it
 * has every live publication from its first on: the Pub/Sub connection delivers them
 * all, in order). Its `before` is the first publication the subscribers get after it:
 * the first held one when the trim reached into the hold, else the page's first
 * (every retained one is newer than every trimmed one) — on a page of only entries
 * another writer left malformed, the last of them, an id no `pub` carries (nothing is
 * lost between it and the next publication; docs/protocol.md "Channels" says so) — else
 * (the history retains nothing after `after`) the first held one. Undefined when
 * nothing is lost: the hold begins right after `after`.
 * @param held the held publications (in id order)
 */
export function refillLoss(after: string, page: HistoryPage, held: readonly ChannelEntry[]): LostRange | undefined {
  const heldFirst = held.find((e) => compareStreamIds(e.id, after) > 0)?.id;
  if (heldFirst !== undefined && compareStreamIds(heldFirst, page.lastTrimmed) <= 0) {
    const lastLost = precedingStreamId(heldFirst);
    return lastLost === undefined || compareStreamIds(lastLost, after) <= 0 ? undefined : { after, before: heldFirst, lastLost };
  }
  const before = page.entries[0]?.id ?? page.readUpTo ?? heldFirst;
  // Nothing retained after the trim (only an operator's XDEL leaves that): no entry to tell it before.
  return before === undefined ? undefined : { after, before, lastLost: page.lastTrimmed };
}

/**
 * The loss a refill's hold tells as it ends (channel-hub.ts `#release`): the live
 * publications it dropped once full (up to {@link Hold.droppedUpTo}) that the refill did
 * not read from the history — newer than `read`, the last entry it read (undefined:
 * it read nothing, or failed: lost from `0-0`, which each subscriber's follower narrows
 * to its own position). The range ends before the hold's first kept publication, the
 * next the subscribers get. Undefined when the hold dropped nothing, the refill read
 * past all it dropped, or it holds nothing now (the refill handed out every held
 * publication, each newer than those dropped: it read past them).
 */
export function holdLoss(hold: Hold | undefined, read: string | undefined): LostRange | undefined {
  const dropped = hold?.droppedUpTo;
  const next = hold?.entries[0];
  if (dropped === undefined || next === undefined) return undefined;
  if (read !== undefined && compareStreamIds(dropped, read) <= 0) return undefined;
  return { after: read ?? '0-0', before: next.id, lastLost: dropped };
}
