/**
 * What a capped Redis stream still holds (stream-bounds-2.lua): read with each catch-up
 * page of the broadcast stream (src/broadcast/broadcast-stream.ts) and of a channel's
 * history (src/channels/channel-stream.ts), in one MULTI with the page's XRANGE, so
 * that whether the stream was trimmed past the page's start is known exactly
 * (DESIGN.md §11: nothing skipped silently).
 */
import type { Redis } from 'ioredis';
import { transaction } from '../redis/client.js';
import { inTransaction, type ScriptSpec } from '../redis/scripts.js';

/** What a stream retains. */
export interface StreamBounds {
  /** First retained entry ID; undefined when the stream is empty or missing. */
  readonly first: string | undefined;
  /** Last entry ID ever generated; undefined when the stream is missing. */
  readonly last: string | undefined;
  /**
   * Highest entry ID removed by trimming (or XDEL), `0-0` when none. Redis 7.0 does not
   * move it when `XADD … MAXLEN` or XTRIM trims: Pixiu's publish scripts trim and set it
   * themselves (broadcast-publish-2.lua, channel-publish-4.lua).
   */
  readonly maxDeleted: string;
}

/** stream-bounds-2.lua: KEYS the stream. Replies [first, last, max deleted] ("" for none). */
export const STREAM_BOUNDS: ScriptSpec = { file: new URL('./lua/stream-bounds-2.lua', import.meta.url), numberOfKeys: 1 };

/** The bounds script's reply as {@link StreamBounds}. */
export function boundsOf([first, last, maxDeleted]: readonly [string, string, string]): StreamBounds {
  return { first: first || undefined, last: last || undefined, maxDeleted: maxDeleted || '0-0' };
}

/** A stream entry as XRANGE answers it: its ID and its fields, flat (`[name, value, …]`). */
export type RawEntry = [string, string[]];

/**
 * Up to `count` entries of the stream `key` after `afterId` (exclusive), oldest first,
 * and the stream's bounds, read as one snapshot (MULTI/EXEC: XRANGE and
 * stream-bounds-2.lua): whether the stream was trimmed past `afterId` before this page
 * was read is then known exactly, also while publishes trim it between two pages.
 * Callers check `afterId` (a stream ID) and wrap the call in `keysCall` for their keys.
 * @throws what the transaction throws: an outage, or Redis refusing `afterId` or the key's type
 */
export async function rangeWithBounds(redis: Redis, key: string, afterId: string, count: number): Promise<{ raw: RawEntry[]; bounds: StreamBounds }> {
  const [range, bounds] = await inTransaction(STREAM_BOUNDS, (command, script) => transaction(() => redis.multi()
    .xrange(key, `(${afterId}`, '+', 'COUNT', String(count))
    [command](script, 1, key)
    .exec()));
  return { raw: (range ?? []) as RawEntry[], bounds: boundsOf(bounds as [string, string, string]) };
}
