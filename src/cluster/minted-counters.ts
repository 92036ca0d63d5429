/**
 * The counters a store minted, as store ownership reads and moves them
 * (src/cluster/store-ownership.ts; DESIGN.md §2: a MsgID is minted once).
 */
/**
 * How far past the highest counter recorded for its partitions a node's counters jump,
 * per partition, when it resumes writes after another node served them (a copy of its
 * data dir, or another store that took its block): that node records its counters once
 * per lease renewal (lease-watch.ts `LEASE_RENEW_MS`), so it may have minted more than it recorded
 * before it was killed. 2^24 is far more than any node mints in one renewal, and a
 * vanishing share of the 2^48 counters (DESIGN.md §2).
 */
export const RESUME_MARGIN = 2 ** 24;

/** The store's counters as ownership reads and moves them (MessageStore). */
export interface MintingStore {
  /** The last counter minted and written to disk, per partition of the store. */
  readonly counters: readonly number[];
  /**
   * Moves each partition's counter up to its target (undefined: left as it is).
   * @throws PixiuError UNAVAILABLE when the store fails
   */
  advanceCounters(targets: readonly (number | undefined)[]): Promise<void>;
}

/** Each partition moved, as `partition p: from → to` (targets undefined: not moved). */
export function movedList(base: number, from: readonly number[], targets: readonly (number | undefined)[]): string[] {
  return targets.flatMap((t, i) => (t === undefined ? [] : [`partition ${base + i}: ${from[i]} → ${t}`]));
}
