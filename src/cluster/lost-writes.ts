/**
 * What a store lease's renewals prove of Redis losing writes it had acknowledged to this
 * node (store-ownership.ts `advertise`, its `onLostWrites`), so that acknowledged inbox
 * appends may be gone too (src/inbox/generation.ts raises the inbox generation):
 * - the store's claim is gone: its description, written with the claim at start and at
 *   every renewal, is missing (a FLUSHALL, a Redis that came back empty or a restore of
 *   a snapshot from before the claim, eviction; not an RDB reload, which keeps the
 *   claim); logged at error (redis-loss-lines.ts);
 * - the lease found is this node's own with an older renewal count than one Redis
 *   acknowledged (a failover to a replica behind by at least one renewal of this
 *   node's, a restore of a snapshot taken within the lease's TTL).
 * A best effort: most failovers, RDB reloads and restores lose neither (README "What
 * delivery promises"). Redis restarted with its AOF kept both: nothing is proven then.
 */
import type { Logger } from '../logger.js';
import type { EvictionSign } from '../redis/persistence-check.js';
import type { StoreLease } from './partition-claims.js';
import { logLostWhileRunning } from './redis-loss-lines.js';

/** What {@link LostWrites} reports to, and how. */
export interface LostWritesOptions {
  /** This node's id: the node of its own leases. */
  readonly node: string;
  /** Where a claim found gone is logged at error, with `fields` (`store`, `redis`). */
  readonly logger: Logger;
  readonly fields: Record<string, unknown>;
  /** Asked when a claim is found gone, to name eviction in its error line (redis-loss-lines.ts `logLostWhileRunning`). */
  readonly evictions?: () => Promise<EvictionSign | undefined>;
  /** Called with a reason for each proof found; none: the claim's loss is only logged. */
  readonly onLostWrites?: (reason: string) => void;
}

/** The proofs of lost writes found by one node's lease renewals, from its first lease write on. */
export class LostWrites {
  readonly #opts: LostWritesOptions;
  /** The renewal count of the last lease write Redis acknowledged (0: none yet). */
  #acknowledged = 0;

  constructor(opts: LostWritesOptions) {
    this.#opts = opts;
  }

  /** A renewal found the store's claim held but without its description: Redis lost its data while this node ran. */
  claimGone(): void {
    const { logger, fields, evictions, onLostWrites } = this.#opts;
    logLostWhileRunning(logger, fields, evictions);
    onLostWrites?.('this store\'s claim was gone');
  }

  /**
   * Redis acknowledged the lease write of `lease`, which found `replaced` in its place
   * (undefined: none). This node's own lease, older than one Redis acknowledged: Redis
   * went back in time.
   */
  leaseWritten(lease: StoreLease, replaced: StoreLease | undefined): void {
    if (replaced?.node === this.#opts.node && (replaced.renewal ?? 0) < this.#acknowledged) {
      this.#opts.onLostWrites?.(`this node's store lease was back at renewal ${replaced.renewal ?? 0}, after Redis had acknowledged renewal ${this.#acknowledged}`);
    }
    this.#acknowledged = lease.renewal ?? 0;
  }
}
