/**
 * The options a message store opens with (src/store/message-store.ts): where its
 * partitions live, how it writes, its limits and its hooks (metrics, tests' clocks).
 */
import type { Logger } from '../logger.js';
import type { StoreLayout } from './layout.js';

/** Options of `MessageStore.open` (message-store.ts); defaults live in the configuration (DESIGN.md §10). */
export interface MessageStoreOptions {
  /** Data folder of the store; partition p lives in `<dir>/<p>` (e.g. `storage/xiu`). */
  readonly dir: string;
  /** Partition count P: a power of two, 1..256 (DESIGN.md §3). */
  readonly partitions: number;
  /**
   * First MsgID partition byte B: partition folder `<dir>/<p>` mints ids of partition
   * B+p (DESIGN.md §9; claimed per data dir, src/cluster/store-ownership.ts). B+P ≤ 256.
   * Default 0. Checked against the store's LAYOUT file.
   */
  readonly partitionBase?: number;
  /**
   * The store's layout as the caller last read or wrote it (a serving start's, its base
   * pinned: src/service/service.ts), checked instead of reading the file again; default:
   * read here, and written for a new store (src/store/layout.ts `checkLayout`).
   */
  readonly layout?: StoreLayout;
  /** true (durability `fsync`): a put resolves after fsync; false: `relaxed`. */
  readonly sync: boolean;
  /** Read-cache size in bytes of record JSON; 0 turns it off. */
  readonly cacheBytes: number;
  /** Retention of a message that names none, ms (default 7 days). */
  readonly defaultTtlMs: number;
  /** Largest UTF-8 JSON of `{type, from, data}`, bytes (default 64 KiB). */
  readonly maxMessageBytes: number;
  /** Wait between expiry sweeps of each partition, ms. */
  readonly sweepIntervalMs: number;
  /**
   * How long one partition write (or job between writes) may be in flight before the
   * partition takes no writes until it ends, ms (`PIXIU_STORE_WRITE_TIMEOUT`; partition.ts,
   * write-stall.ts); default 10 s.
   */
  readonly writeTimeoutMs?: number;
  readonly logger?: Logger;
  /** Clock, ms since the epoch; default `Date.now`. Tests inject one to skip time. */
  readonly now?: () => number;
  /**
   * A clock that never steps, ms from any origin, that bounds how far the sweeps'
   * cutoff may move (src/store/sweep-clock.ts). Default: `performance.now`, or `now`
   * itself when `now` is given (a test's clock moves only when the test moves it).
   */
  readonly monotonic?: () => number;
  /**
   * Now by Redis's clock as this node knows it, ms since the epoch, counted on a clock
   * that never steps (NodeRegistry.redisClock); undefined until first measured. When
   * given: a new message's expiry counts from the later of it (less
   * `CLOCK_SKEW_BOUND_MS`) and the store's clock (record.ts), a sweep's cutoff is never
   * more than `CLOCK_SKEW_BOUND_MS` ahead of it, and no sweep deletes anything while it
   * is undefined (sweep-clock.ts); a `client_msg_id` retry judges its first record live
   * by the same bound (SweepClock.liveNow). Not given (tools, tests): the store's clock
   * alone.
   */
  readonly redisClock?: (() => number | undefined) | undefined;
  /**
   * Called after each batch write that wrote records, with how many (new messages; a
   * put answered as a duplicate of a stored message writes nothing and is not counted)
   * and its duration in ms (metrics; partition.ts `onBatch`).
   */
  readonly onBatch?: (written: number, ms: number) => void;
  /** Called once per failed partition write (metrics; partition.ts `onWriteFailure`). */
  readonly onWriteFailure?: () => void;
  /** Called once per record found undecodable, when it is logged (metrics; unreadable.ts). */
  readonly onUnreadable?: () => void;
}
