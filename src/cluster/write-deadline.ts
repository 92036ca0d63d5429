/**
 * The deadline the store lease gives the store's writes (DESIGN.md §9; the store's side:
 * src/store/write-fence.ts), as store-ownership.ts's renewals move it: each renewal that
 * finds the lease this node's moves it to {@link LEASE_FENCE_MS} after that renewal
 * began. Before writes resume after the lease lapsed, or after another node served the
 * store's partitions, the counters are first moved past what any node recorded for
 * them (minted-counters.ts), so that no id another node may have minted is minted again.
 */
import type { Logger } from '../logger.js';
import { LEASE_FENCE_MS } from './lease-watch.js';
import type { MintedRecord, MintingStore } from './minted-counters.js';

/** The store as its ownership drives it: its counters, and the deadline of its writes by the lease. */
export interface OwnedStore extends MintingStore {
  /** Takes writes until `until`, ms on the ownership's clock (MessageStore `writeUntil`). */
  writeUntil(until: number): void;
  /** A renewal failed: Redis's refusal of it in plain words, or undefined (MessageStore `leaseRenewalFailed`). */
  leaseRenewalFailed(refusal: string | undefined): void;
}

/** One store's writes' deadline, and whether its counters must move before it moves on. */
export class WriteDeadline {
  readonly #minted: MintedRecord;
  readonly #logger: Logger;
  readonly #storeId: string;
  /** The deadline last given to the store's writes, on the ownership's clock; none before the first renewal. */
  #writableUntil = Infinity;
  /**
   * True from a renewal (not the first) that found no lease of this node's — it lapsed,
   * Redis lost it, or another node's was in its place — until the counters moved past
   * what any node recorded for the store's partitions ({@link confirmed}, or
   * {@link movePastOthers} after a conflict). Until then no renewal moves the writes'
   * deadline on. Kept across renewals: the one that saw the lapse rewrote the lease, so
   * the next finds its own, and a move that failed, or a pause between a renewal's
   * start and its lease write (a renewal that finds no lease yet is not late), would
   * otherwise let writes resume with counters another node used (review1 F1).
   */
  #mustMovePast = false;

  /**
   * @param minted the store's counters as Redis records them
   * @param storeId the data dir's store id, for the log lines
   */
  constructor(minted: MintedRecord, logger: Logger, storeId: string) {
    this.#minted = minted;
    this.#logger = logger;
    this.#storeId = storeId;
  }

  /** True when the writes' deadline has passed at `now` (on the ownership's clock). */
  passed(now: number): boolean {
    return now >= this.#writableUntil;
  }

  /** A renewal after the first found no lease of this node's: the counters move before writes resume. */
  lapsed(): void {
    this.#mustMovePast = true;
  }

  /**
   * Before writes resume after another node served this store's partitions (a copy of
   * this data dir beside it, or another store that took the block): moves each counter
   * to `RESUME_MARGIN` past the highest recorded for its partition by any store
   * (minted-counters.ts `MintedRecord`; this node's own counters are among them), so that no id
   * that node may have minted, recorded or not, is minted again (recipients' inboxes
   * would show this node's message for theirs). A counter already there stays (a retry
   * after a failed move moves nothing twice). What that node stored is not in this
   * store: those ids read as missing.
   * @param store the store (undefined: none yet, nothing moved)
   * @throws PixiuError UNAVAILABLE when Redis or the store fails (writes stay suspended)
   */
  async movePastOthers(store: OwnedStore | undefined): Promise<void> {
    if (store === undefined) return;
    const moved = await this.#minted.movePastRecorded(store, false);
    this.#mustMovePast = false;
    this.#logger.error({ store: this.#storeId, moved },
      'another node served this store\'s partitions meanwhile: counters moved past what it may have minted before writes resume; the messages it stored are not in this data dir and read as missing');
  }

  /**
   * A renewal that began at `since` (on the ownership's clock) found the lease this node's:
   * the store takes writes until {@link LEASE_FENCE_MS} after it. When a renewal found
   * no lease of this node's since the counters last moved ({@link lapsed}: the
   * lease lapsed, and another node may have served the store and left), its counters
   * are first moved past what any node recorded for its partitions, as after a
   * conflict, where that record is above them; a failed move leaves the deadline where
   * it was, and the next renewal tries again.
   * @param store the store (undefined: none yet, nothing done)
   * @param conflicted true while the store's partitions are not this node's alone (the
   *   ownership says when writes resume then, not this)
   * @throws PixiuError UNAVAILABLE when Redis or the store fails (the deadline stays)
   */
  async confirmed(store: OwnedStore | undefined, since: number, conflicted: boolean): Promise<void> {
    if (store === undefined) return;
    const late = since >= this.#writableUntil;
    const lapsed = this.#mustMovePast;
    if (lapsed) {
      const moved = await this.#minted.movePastRecorded(store, true);
      this.#mustMovePast = false;
      if (moved.length > 0) {
        this.#logger.error({ store: this.#storeId, moved },
          'this node\'s store lease lapsed while it was not renewed, and another node served this store\'s partitions meanwhile: counters moved past what it minted before writes resume; the messages it stored are not in this data dir and read as missing');
      }
    }
    if (late && !conflicted) this.#logger.warn({ store: this.#storeId, lapsed }, 'store lease confirmed again after its writes\' deadline passed: writes resumed');
    this.#writableUntil = since + LEASE_FENCE_MS;
    store.writeUntil(this.#writableUntil);
  }
}
