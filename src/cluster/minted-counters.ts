/**
 * The counters a store minted, as store ownership reads, records and moves them
 * (src/cluster/store-ownership.ts; DESIGN.md §2: a MsgID is minted once): the moves
 * worked out here, and {@link MintedRecord}, the counters of a store's block as Redis
 * records them.
 */
import { MAX_COUNTER } from '../ids/msg-id.js';
import type { PartitionClaims } from './partition-claims.js';

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
   * The last counter assigned in memory, per partition: what the next id counts on
   * from, at or above `counters` (the serving node's time floor raises it before
   * anything is written: src/store/time-floor.ts).
   */
  readonly assignedCounters: readonly number[];
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

/**
 * Per partition, the counter a move must pass to move anything: the larger of the one
 * assigned in memory and the one written (advanceCounters leaves a partition whose
 * counter is at or above its target as it is).
 */
export function countersInUse(store: MintingStore): number[] {
  return store.counters.map((written, i) => Math.max(written, store.assignedCounters[i] ?? 0));
}

/**
 * Where a move past the recorded counters takes each partition: {@link RESUME_MARGIN}
 * past `recorded[i]` (at most MAX_COUNTER) where that is above `inUse[i]` and, with
 * `onlyBehind`, only where the record itself is above it (at start: a data dir that is
 * not behind does not move); undefined where it does not move.
 * @param inUse per partition, the counter in use ({@link countersInUse})
 * @param recorded per partition, the highest counter any store recorded (0 for none)
 */
export function moveTargets(inUse: readonly number[], recorded: readonly number[], onlyBehind: boolean): (number | undefined)[] {
  return inUse.map((local, i) => {
    const top = recorded[i] ?? 0;
    const past = Math.min(MAX_COUNTER, top + RESUME_MARGIN);
    return past > local && (!onlyBehind || top > local) ? past : undefined;
  });
}

/** Which store's counters, over which partitions (StoreOwnership has them). */
export interface MintedBlock {
  /** The data dir's store id (its LAYOUT file): the counters are recorded under it. */
  readonly storeId: string;
  /** First MsgID partition byte of the block. */
  readonly partitionBase: number;
  /** Partition count P of the store. */
  readonly partitions: number;
}

/**
 * One store's counters in Redis (partition-claims.ts `recordMinted`, `mintedOf`):
 * recorded by its node with each lease renewal and at shutdown, and read back, with
 * those of every other store that held its block, to move the store past every id
 * minted in it.
 */
export class MintedRecord {
  readonly #claims: PartitionClaims;
  readonly #block: MintedBlock;

  constructor(claims: PartitionClaims, block: MintedBlock) {
    this.#claims = claims;
    this.#block = block;
  }

  /**
   * Records the store's counters — also while another node serves the store beside
   * this one: a recorded counter never goes down, and whichever node serves the store
   * next must move past every id either minted.
   * @param store the store (undefined: none yet, nothing recorded)
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async record(store: MintingStore | undefined): Promise<void> {
    if (store === undefined) return;
    await this.#claims.recordMinted(this.#block.storeId, this.#block.partitionBase, store.counters);
  }

  /**
   * The highest counter recorded for each partition of this block by any store: this
   * one (its copies record under its id) and any other that held the block (a new data
   * dir that took it while Redis had lost the claims). 0 where none was.
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async #highestRecorded(): Promise<number[]> {
    const claims = this.#claims;
    const { storeId, partitionBase, partitions } = this.#block;
    const ids = new Set([storeId, ...await claims.storeIds()]);
    const recorded = await Promise.all([...ids].map((id) => claims.mintedOf(id)));
    return Array.from({ length: partitions }, (_, i) =>
      recorded.reduce((top, m) => Math.max(top, m.get(partitionBase + i) ?? 0), 0));
  }

  /**
   * Moves counters to {@link RESUME_MARGIN} past the highest recorded for their
   * partition by any store ({@link #highestRecorded}), where that is above the counter
   * in use ({@link countersInUse}: a time floor above the target moves nothing); with
   * `onlyBehind`, only where the record itself is above the counter (at start: a data
   * dir that is not behind does not move).
   * @returns the partitions moved, as `partition p: a → b`
   * @throws PixiuError UNAVAILABLE when Redis or the store fails
   */
  async movePastRecorded(store: MintingStore, onlyBehind: boolean): Promise<string[]> {
    const top = await this.#highestRecorded();
    const from = countersInUse(store);
    const targets = moveTargets(from, top, onlyBehind);
    const moved = movedList(this.#block.partitionBase, from, targets);
    if (moved.length > 0) await store.advanceCounters(targets);
    return moved;
  }
}
