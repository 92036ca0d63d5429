/**
 * What a channel's refill needs (src/channels/channel-hub.ts; docs/decisions.md
 * "Channels"): once the node's subscriber connection is back, each channel it follows
 * is read again from its history after the earliest position of its local
 * subscribers, its live publications held meanwhile.
 */
import { HISTORY_PAGE, type ChannelEntry, type ChannelStream } from './channel-stream.js';
import { compareStreamIds } from '../streams/stream-id.js';

/** Where a subscriber is in a channel (see ChannelSubscriber). */
interface Positioned {
  positionOf(channel: string): string | undefined;
}

/** A channel's live publications held during a refill, in id order, and the end of the hold. */
export class Hold {
  readonly entries: ChannelEntry[] = [];
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

/**
 * Reads a channel's history after `from` up to `upTo` (both ids), page by page, and
 * hands each publication to `each`, oldest first, while `going` says so.
 * @throws PixiuError UNAVAILABLE when a read fails
 */
export async function readHistory(stream: ChannelStream, channel: string, from: string, upTo: string,
  going: () => boolean, each: (entry: ChannelEntry) => void): Promise<void> {
  let after = from;
  while (compareStreamIds(after, upTo) < 0) {
    const page = await stream.range(channel, after, HISTORY_PAGE);
    if (!going()) return;
    for (const entry of page.entries) {
      if (compareStreamIds(entry.id, upTo) > 0) return;
      each(entry);
    }
    if (page.readUpTo === undefined) return;
    after = page.readUpTo;
  }
}
