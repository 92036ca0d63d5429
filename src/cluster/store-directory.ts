/**
 * Who owns a MsgID partition, and where its node can be read (DESIGN.md §9), from the
 * claims and leases in Redis (partition-claims.ts), cached briefly so a delivery read
 * does not cost Redis round trips each time.
 *
 * Claims change rarely (a new data dir's first start, an operator's removal), leases
 * every time a node starts or stops: claims are kept 5 s, leases 2 s, and the answers
 * that mean "cannot be read now" or "nobody" (no lease, no claim) 1 s, so a node that
 * comes back is used again within a second. A reader that fails to reach a node calls
 * {@link StoreDirectory.forget}, so the next read looks the lease up again (a restarted
 * node may listen elsewhere). Concurrent lookups of one key share one Redis call.
 */
import { LRUCache } from 'lru-cache';
import type { PartitionClaims, StoreLease } from './partition-claims.js';

/** How long a claim (partition → store id) is cached, ms. */
export const CLAIM_CACHE_MS = 5000;
/** How long a lease (store id → URL) is cached, ms. */
export const LEASE_CACHE_MS = 2000;
/** How long "unclaimed" and "no lease" are cached, ms. */
export const ABSENT_CACHE_MS = 1000;

/**
 * The claim an operator writes for the partitions of a data dir gone for good
 * (docs/decisions.md "Several nodes"): their records read as missing (gaps), and no
 * store may claim them again (their ids were minted once).
 */
export const RETIRED_STORE = 'retired';

/** The owner of one MsgID partition, as the directory knows it. */
export type PartitionOwner =
  /**
   * No store claims it now: Redis lost the claims (restarted empty, flushed) and the
   * owner has not re-asserted its claim yet, or nobody ever minted ids in it. Its
   * records cannot be read now; they are not known to be gone.
   */
  | { readonly state: 'unclaimed' }
  /** Claimed as {@link RETIRED_STORE}: its store is gone for good; its records are missing. */
  | { readonly state: 'retired' }
  /**
   * Store `storeId` holds it; `lease` says where its node is read, undefined when the
   * store has no live lease (its node is stopped or unreachable from Redis).
   */
  | { readonly state: 'owned'; readonly storeId: string; readonly lease: StoreLease | undefined };

/** Owner lookups, as the store router needs them (tests stub it). */
export interface OwnerLookup {
  /**
   * The owner of each partition asked.
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  owners(partitions: Iterable<number>): Promise<Map<number, PartitionOwner>>;
  /** Drops what is cached about `storeId`'s lease (its node could not be reached). */
  forget(storeId: string): void;
}

/** The cached directory of partition owners. */
export class StoreDirectory implements OwnerLookup {
  /** partition → store id, '' when unclaimed. */
  readonly #claims: LRUCache<number, string>;
  readonly #leases: LRUCache<string, { readonly lease: StoreLease | undefined }>;

  constructor(claims: PartitionClaims) {
    // ignoreFetchAbort: a lookup in flight when its entry is dropped (forget) still
    // answers its callers, with what it read; without it lru-cache rejects them with
    // Error('deleted'), which reached producers as a 500 (a fresh operator's finding).
    this.#claims = new LRUCache<number, string>({
      max: 256,
      ttl: CLAIM_CACHE_MS,
      ignoreFetchAbort: true,
      fetchMethod: async (partition, _stale, { options }) => {
        const owner = await claims.ownerOf(partition);
        if (owner === null) options.ttl = ABSENT_CACHE_MS;
        return owner ?? '';
      },
    });
    this.#leases = new LRUCache<string, { readonly lease: StoreLease | undefined }>({
      max: 1024,
      ttl: LEASE_CACHE_MS,
      ignoreFetchAbort: true,
      fetchMethod: async (storeId, _stale, { options }) => {
        const lease = await claims.leaseOf(storeId);
        if (lease === undefined) options.ttl = ABSENT_CACHE_MS;
        return { lease };
      },
    });
  }

  async owners(partitions: Iterable<number>): Promise<Map<number, PartitionOwner>> {
    const asked = [...new Set(partitions)];
    const storeIds = await Promise.all(asked.map((p) => this.#claims.fetch(p)));
    const distinct = [...new Set(storeIds.filter((s): s is string => s !== undefined && s !== '' && s !== RETIRED_STORE))];
    const leases = new Map(await Promise.all(distinct.map(async (s) => [s, (await this.#leases.fetch(s))?.lease] as const)));
    const out = new Map<number, PartitionOwner>();
    asked.forEach((p, i) => {
      const storeId = storeIds[i];
      out.set(p, storeId === undefined || storeId === ''
        ? { state: 'unclaimed' }
        : storeId === RETIRED_STORE ? { state: 'retired' } : { state: 'owned', storeId, lease: leases.get(storeId) });
    });
    return out;
  }

  forget(storeId: string): void {
    this.#leases.delete(storeId);
  }
}
