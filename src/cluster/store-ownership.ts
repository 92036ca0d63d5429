/**
 * This node's ownership of its store's partitions (DESIGN.md §2, §9): the block of
 * MsgID partition bytes its data dir mints, claimed in Redis on the data dir's first
 * start and pinned in its LAYOUT file (src/store/layout.ts), and the lease that tells
 * other nodes where to read them.
 *
 * - {@link StoreOwnership.claim}, before the store opens: the data dir's store id and
 *   base. A new data dir claims the lowest free block; one with a base re-asserts it; a
 *   block held by another store is a {@link StartupError} — never colliding ids.
 * - {@link StoreOwnership.advertise}, once the node listens: writes the lease
 *   (`{url, node}`, TTL {@link LEASE_TTL_MS}) and every {@link LEASE_RENEW_MS} renews
 *   it and re-asserts the claim, so both come back after a FLUSHALL. A re-assertion
 *   that finds the block held by another store (a new data dir claimed it in the
 *   moments after a FLUSHALL) suspends this node's writes until the block is its own
 *   again, and logs at error.
 * - {@link StoreOwnership.stop}, on shutdown: stops renewing and drops the lease, so
 *   readers learn at once that the store cannot be read now.
 */
import os from 'node:os';
import type { Logger } from '../logger.js';
import { StartupError, outageFields } from '../errors.js';
import { openLayout, pinPartitionBase } from '../store/layout.js';
import { claimRefusal, partitionSpan, type PartitionClaims, type StoreDescription, type StoreLease } from './partition-claims.js';

/** Lease renewal (and claim re-assertion) period, ms: the node registry's heartbeat. */
export const LEASE_RENEW_MS = 5000;
/** A lease not renewed for this long lapses, ms (three missed renewals). */
export const LEASE_TTL_MS = 3 * LEASE_RENEW_MS;

/**
 * The URL other nodes reach a node at when PIXIU_ADVERTISE_URL is unset:
 * `http://<host>:<port>`, with a wildcard listen address (`0.0.0.0`, `::`) replaced by
 * 127.0.0.1 (right for nodes on one machine; set PIXIU_ADVERTISE_URL otherwise) and an
 * IPv6 address in brackets.
 */
export function defaultAdvertiseUrl(host: string, port: number): string {
  const wildcard = host === '' || host === '0.0.0.0' || host === '::' || host === '[::]';
  const name = wildcard ? '127.0.0.1' : host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return `http://${name}:${port}`;
}

/** Options of {@link StoreOwnership.claim}. */
export interface StoreOwnershipOptions {
  readonly claims: PartitionClaims;
  /** The store folder, `<dataDir>/xiu`. */
  readonly dir: string;
  /** Partition count P of the store. */
  readonly partitions: number;
  readonly logger: Logger;
}

/** The partitions this node's store holds, and their lease. */
export class StoreOwnership {
  /** The data dir's store id (its LAYOUT file). */
  readonly storeId: string;
  /** First MsgID partition byte: the store holds `partitionBase .. partitionBase + partitions - 1`. */
  readonly partitionBase: number;
  readonly partitions: number;
  readonly #opts: StoreOwnershipOptions;
  readonly #description: StoreDescription;
  #timer: NodeJS.Timeout | undefined;
  #renewing: Promise<void> | undefined;
  #conflict: string | undefined;
  #renewNow: (() => void) | undefined;

  private constructor(opts: StoreOwnershipOptions, storeId: string, base: number, description: StoreDescription) {
    this.#opts = opts;
    this.storeId = storeId;
    this.partitionBase = base;
    this.partitions = opts.partitions;
    this.#description = description;
  }

  /**
   * Claims (first start of the data dir) or re-asserts its block, and pins the base in
   * the LAYOUT file. Run before the store opens.
   * @throws StartupError naming the data dir, the partitions and the other store when
   *   another store holds the block, when no block is free, or when the layout file
   *   is wrong (src/store/layout.ts)
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  static async claim(opts: StoreOwnershipOptions): Promise<StoreOwnership> {
    const layout = await openLayout(opts.dir, opts.partitions);
    const description: StoreDescription = { dir: opts.dir, host: os.hostname() };
    const answer = await opts.claims.claim(layout.storeId, opts.partitions, layout.partitionBase, description);
    if (answer.kind !== 'held') throw new StartupError(claimRefusal(opts.dir, layout.partitionBase, opts.partitions, answer));
    const pinned = await pinPartitionBase(opts.dir, layout, answer.base);
    opts.logger.info({ store: pinned.storeId, partitions: partitionSpan(answer.base, opts.partitions) }, 'store partitions claimed');
    return new StoreOwnership(opts, pinned.storeId, answer.base, description);
  }

  /**
   * Writes the lease now, then renews it and re-asserts the claim every
   * {@link LEASE_RENEW_MS}. A failed renewal logs and is tried again next time.
   * @param lease where this node is read
   * @param onConflict called with a reason when another store holds the block (writes
   *   must stop), and with undefined when the block is this store's again
   * @throws PixiuError UNAVAILABLE when the first lease cannot be written
   */
  async advertise(lease: StoreLease, onConflict: (reason: string | undefined) => void): Promise<void> {
    const { claims, logger } = this.#opts;
    const renew = async (): Promise<void> => {
      const answer = await claims.claim(this.storeId, this.partitions, this.partitionBase, this.#description);
      const conflict = answer.kind === 'held' ? undefined : claimRefusal(this.#opts.dir, this.partitionBase, this.partitions, answer);
      if (conflict !== this.#conflict) {
        if (conflict !== undefined) logger.error({ store: this.storeId, reason: conflict }, 'store partition claim lost: writes suspended');
        else logger.warn({ store: this.storeId }, 'store partition claim held again: writes resumed');
        this.#conflict = conflict;
        onConflict(conflict === undefined ? undefined : `message store writes are suspended: ${conflict}`);
      }
      await claims.renewLease(this.storeId, lease, LEASE_TTL_MS);
    };
    await renew();
    logger.info({ store: this.storeId, url: lease.url }, 'store lease held');
    this.#renewNow = () => {
      this.#renewing ??= renew()
        .catch((err: unknown) => logger.warn({ ...outageFields(err), store: this.storeId }, 'store lease renewal failed'))
        .finally(() => { this.#renewing = undefined; });
    };
    this.#timer = setInterval(this.#renewNow, LEASE_RENEW_MS);
    this.#timer.unref();
  }

  /**
   * Re-asserts the claim and renews the lease now (Redis is back after an outage: it
   * may have lost both, and other nodes cannot read this store's records until they
   * are written back). Does nothing before {@link advertise} or after {@link stop}.
   */
  renewNow(): void {
    this.#renewNow?.();
  }

  /** Stops renewing and drops the lease. Idempotent; never rejects. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#renewNow = undefined;
    await this.#renewing;
    await this.#opts.claims.releaseLease(this.storeId);
  }
}
