/**
 * The claim of a data dir's block of MsgID partitions at start (DESIGN.md §2, §9),
 * before its store opens: the lease looked at first (a copy of a running node's data
 * dir is refused, writing nothing), the wait for claims Redis has just lost to be
 * written back by the running nodes, then the claim, and the base pinned in the LAYOUT
 * file (src/store/layout.ts). src/cluster/store-ownership.ts holds the block from then on.
 */
import os from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from '../logger.js';
import { StartupError } from '../errors.js';
import type { EvictionSign } from '../redis/persistence-check.js';
import { openLayout, pinPartitionBase, type FoundLayout, type IdentifiedLayout } from '../store/layout.js';
import { claimRefusal, partitionSpan, type PartitionClaims, type StoreDescription } from './partition-claims.js';
import { awaitLeaseFree } from './lease-watch.js';

/** Longest a running node takes to reconnect to a restarted Redis, ms (its back-off tops out at 2 s; with the connect). */
export const RECONNECT_BOUND_MS = 5000;
/** Options of `StoreOwnership.claim` (store-ownership.ts), which {@link claimBlock} takes. */
export interface StoreOwnershipOptions {
  readonly claims: PartitionClaims;
  /** The store folder, `<dataDir>/xiu`. */
  readonly dir: string;
  /** Partition count P of the store. */
  readonly partitions: number;
  /** Its layout as the start read it (src/store/layout.ts `refuseUnreadableStore`); default: read here. */
  readonly layout?: FoundLayout;
  readonly logger: Logger;
  /**
   * How long the claims must have been in Redis before a node starts while other nodes
   * run, ms (setting `claimsSettleMs`, 6 s, on a shared Redis; 0 on the embedded one,
   * which no other node uses): right after Redis lost them (FLUSHALL, restarted empty)
   * the nodes still running have not re-asserted their claims and leases yet, so a new
   * data dir could take a block one of them mints in, and a copy of a running node's
   * data dir would find no lease. A data dir with a block looks for its lease again
   * after the wait.
   */
  readonly settleMs?: number;
  /**
   * How many nodes run on this Redis now (bus.ts `listeningNodes`), and how long Redis
   * has run, ms: with no node running and Redis up longer than {@link RECONNECT_BOUND_MS}
   * (a Redis restarted empty drops the running nodes' subscriptions until they
   * reconnect), claims are not waited for.
   */
  readonly runningNodes?: () => Promise<number>;
  readonly redisUptimeMs?: () => Promise<number>;
  /**
   * Which Redis and key prefix this is, as the operator named them (a URL without its
   * password, the prefix), for the error of a store this Redis does not know.
   */
  readonly redisName?: string;
  /**
   * The clock the store's write fence reads (MessageStore option `monotonic`), ms from
   * any origin, never stepping: renewals set the fence's deadline on it
   * (store-ownership.ts). Default `performance.now`, the store's default too.
   */
  readonly monotonic?: () => number;
  /**
   * Whether Redis has evicted keys (src/redis/persistence-check.ts `evictionSign`),
   * asked when a renewal finds the store's claim gone, to name eviction in its error
   * line; default: never asked (the line names a FLUSHALL or a restart).
   */
  readonly evictions?: () => Promise<EvictionSign | undefined>;
}

/** A block claimed at start ({@link claimBlock}). */
export interface ClaimedBlock {
  /** The store's layout as the claim left it (its base pinned). */
  readonly layout: IdentifiedLayout;
  /** First MsgID partition byte of the block. */
  readonly base: number;
  /** What the claim wrote of the store (its folder and host), written again with each renewal. */
  readonly description: StoreDescription;
  /**
   * The node of a lease of this store found at start and judged left behind by a
   * process no longer running (`awaitLeaseFree`); undefined when there was none.
   */
  readonly leftBehind: string | undefined;
  /** Redis did not know this store though the data dir had a block (store-ownership.ts `checkKnown`). */
  readonly unknownAtStart: boolean;
}

/**
 * Claims (first start of the data dir) or re-asserts its block, and pins the base in
 * the LAYOUT file: what `StoreOwnership.claim` runs before the store opens.
 * @throws StartupError naming the data dir, the partitions and the other store when
 *   another store holds the block, when no block is free, or when the layout file
 *   is wrong (src/store/layout.ts)
 * @throws PixiuError UNAVAILABLE when Redis fails
 */
export async function claimBlock(opts: StoreOwnershipOptions): Promise<ClaimedBlock> {
  const layout = await openLayout(opts.dir, opts.partitions, opts.layout);
  // First, and only reading: a copy refused here, or after the wait below, writes
  // nothing (not the store's description, which names the running store's folder to
  // other stores; only the claims' age mark, which the running nodes write anyway).
  let leftBehind = await awaitLeaseFree(opts.claims, layout.storeId, opts.dir, opts.logger);
  if ((opts.settleMs ?? 0) > 0) {
    // Right after Redis lost its data, the running nodes have not written their claims
    // and leases back yet. A first claim picks the lowest free block: free must mean
    // no running node's. A data dir with a block may be a copy of a running node's,
    // whose lease is not back yet: it is looked for again once it would be.
    const waitMs = (opts.settleMs ?? 0) - await opts.claims.claimsAge();
    const nodesRun = opts.runningNodes === undefined || await opts.runningNodes() > 0;
    // Nodes that ran before a Redis restart may not have reconnected yet.
    const redisNew = !nodesRun && opts.redisUptimeMs !== undefined && await opts.redisUptimeMs() < RECONNECT_BOUND_MS;
    if (waitMs > 0 && (nodesRun || redisNew)) {
      const what = layout.partitionBase === undefined ? 'claiming a free block' : 'checking that no running node serves this data dir\'s store';
      opts.logger.info({ waitMs, why: nodesRun ? 'other nodes run' : 'Redis has just started' }, nodesRun
        ? `the partition claims in Redis are under 6 s old and other nodes run (Redis lost its data, or is new): waiting until every running node has written its claim and lease back (within one 5 s heartbeat) before ${what}`
        : `Redis has just started and its partition claims are under 6 s old: waiting until nodes that ran before it started have reconnected and written their claims and leases back (within one 5 s heartbeat) before ${what}`);
      await delay(waitMs);
      if (layout.partitionBase !== undefined) leftBehind = await awaitLeaseFree(opts.claims, layout.storeId, opts.dir, opts.logger);
    }
  }
  const description: StoreDescription = { dir: opts.dir, host: os.hostname() };
  const answer = await opts.claims.claim(layout.storeId, opts.partitions, layout.partitionBase, description);
  if (answer.kind !== 'held') throw new StartupError(claimRefusal(opts.dir, layout.partitionBase, opts.partitions, answer));
  const pinned = await pinPartitionBase(opts.dir, layout, answer.base);
  opts.logger.info({ store: pinned.storeId, partitions: partitionSpan(answer.base, opts.partitions) }, 'store partitions claimed');
  return { layout: pinned, base: answer.base, description, leftBehind, unknownAtStart: layout.partitionBase !== undefined && !answer.known };
}
