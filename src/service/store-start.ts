/**
 * The data dir's message store, made ready to serve before the node listens (DESIGN.md
 * §3, §9): its block of MsgID partitions claimed in Redis before the store mints any
 * id, the store opened with its writes held until the node holds its store lease, its
 * counters moved past any id minted before (an older copy of the data dir, a backup),
 * and the router every read of records goes through.
 */
import type { Redis } from 'ioredis';
import type { Metrics } from '../api/metrics.js';
import { defaultAdvertiseUrl, refuseBadPort } from '../cluster/advertise-check.js';
import { listeningNodes } from '../cluster/bus.js';
import { ClusterSecret } from '../cluster/cluster-secret.js';
import { PartitionClaims } from '../cluster/partition-claims.js';
import { prefixMoveLine, refuseClusterSplit } from '../cluster/prefix-guard.js';
import { StoreDirectory } from '../cluster/store-directory.js';
import { StoreOwnership } from '../cluster/store-ownership.js';
import { StoreRouter } from '../cluster/store-router.js';
import { embeddedRedisHint } from '../redis/embedded-hint.js';
import { Keys } from '../redis/keys.js';
import { evictionSign, redisUptimeMs } from '../redis/persistence-check.js';
import { redactUrl } from '../redis/url.js';
import { recordRedisPrefix, type FoundLayout, type IdentifiedLayout } from '../store/layout.js';
import { MessageStore } from '../store/message-store.js';
import { applyTimeFloor } from '../store/time-floor.js';
import type { StartedRedis } from './redis-start.js';
import { storeCloseStep } from './store-close.js';
import type { StartContext } from './start-context.js';

/** The store side of a started node (see the module comment). */
export interface StartedStore {
  readonly keys: Keys;
  /** This data dir's claim of its block, and its store lease once advertised. */
  readonly ownership: StoreOwnership;
  /** The secret nodes read each other's records with. */
  readonly clusterSecret: ClusterSecret;
  readonly store: MessageStore;
  /** Reads of records: the local store's, and other nodes' from their owners. */
  readonly records: StoreRouter;
  /** The store layout as recorded now (its Redis prefix included, on a shared Redis). */
  readonly layout: IdentifiedLayout;
  /** The time floor applied (src/store/time-floor.ts); undefined when the clock gave none. */
  readonly timeFloor: number | undefined;
  /** Lets the store's held writes go, once the lease write ended (however it ended). */
  readonly leaseSettled: () => void;
  /**
   * Gives the store Redis's clock once the node registry measures it (Gateway.redisClock):
   * until then the store's sweeps delete nothing; it also floors new messages' expiry
   * and bounds a retry's live check (store-options.ts `redisClock`).
   */
  readonly followRedisClock: (clock: () => number | undefined) => void;
}

/**
 * Claims, opens and readies the store in `storeDir`; its shutdown steps (the store's
 * close, bounded: store-close.ts, then its counters recorded in Redis) go first in
 * `start.cleanup`.
 * @param found the store layout as the start read it
 * @throws StartupError (and the errors of the refusals it calls) when the advertised
 *   port would be refused, the start would split a cluster, no block can be claimed, or
 *   a partition cannot be opened
 */
export async function startStore(
  start: StartContext, started: StartedRedis, storeDir: string, found: FoundLayout, metrics: Metrics,
): Promise<StartedStore> {
  const { config, logger, cleanup, stopAsked } = start;
  const { redis, renewals, url: redisUrl, local } = started;
  // Several nodes (DESIGN.md §9): this data dir's block of MsgID partitions, claimed
  // in Redis before the store mints any id, and the secret nodes read each other with.
  const keys = new Keys(config.redisPrefix);
  const claims = new PartitionClaims(redis, keys);
  // Refused before the data dir claims anything: an advertised port the other nodes'
  // fetch refuses (known then when the URL or the port is set), and a start on another
  // database, or under another prefix beside running nodes, which would split their
  // cluster (prefix-guard.ts).
  let movedFrom: string | undefined;
  if (local === undefined) {
    const known = config.advertiseUrl ?? (config.port === 0 ? undefined : defaultAdvertiseUrl(config.host, config.port));
    if (known !== undefined) await refuseBadPort(known);
    movedFrom = await refuseClusterSplit(redis, {
      dataDir: config.dataDir, layout: found, prefix: config.redisPrefix, db: redis.options.db ?? 0, redisUrl: redactUrl(redisUrl),
    });
  }
  // 0 is for one node per Redis (docs/decisions.md, "Several nodes"); an operator who
  // set it beside running nodes was told nothing (a black-box SRE's finding).
  if (local === undefined && config.claimsSettleMs === 0 && await listeningNodes(redis, keys) > 0) {
    logger.warn('PIXIU_CLAIMS_SETTLE is 0 while other nodes run on this Redis: a node started right after Redis lost its data '
      + 'may then claim a running node\'s block of message-id partitions and mint ids it has used (one user reads another\'s message); '
      + '0 is for one node per Redis: leave it unset (6 s) beside other nodes');
  }
  // On a shared Redis a new data dir's first claim waits for claims Redis just lost to
  // be re-asserted; the embedded one has no other node.
  // The lease's renewals on their own connection, never behind client traffic (redis-start.ts).
  const ownership = await StoreOwnership.claim({
    claims: new PartitionClaims(renewals, keys), dir: storeDir, partitions: config.partitions, layout: found, logger,
    settleMs: local === undefined ? config.claimsSettleMs : 0, runningNodes: () => listeningNodes(redis, keys),
    redisUptimeMs: () => redisUptimeMs(redis), evictions: () => evictionSign(redis),
    redisName: `${redactUrl(redisUrl)}, key prefix "${config.redisPrefix}"`,
  });
  const clusterSecret = await ClusterSecret.load(redis, keys);
  stopAsked();

  // Redis's clock, known once the registry's first renewal measured it (the gateway starts after the store).
  let redisClock: () => number | undefined = () => undefined;
  const store = await MessageStore.open({
    dir: storeDir,
    redisClock: () => redisClock(),
    partitions: config.partitions,
    partitionBase: ownership.partitionBase,
    layout: ownership.layout,
    sync: config.storeDurability === 'fsync',
    cacheBytes: config.storeCacheBytes,
    defaultTtlMs: config.messageTtlMs,
    maxMessageBytes: config.maxMessageBytes,
    sweepIntervalMs: config.sweepIntervalMs,
    writeTimeoutMs: config.storeWriteTimeoutMs,
    logger,
    onBatch: (written, ms) => metrics.store.observeBatch(written, ms),
    onWriteFailure: () => metrics.store.writeFailures.inc(),
    onUnreadable: () => metrics.store.unreadableRecords.inc(),
  });
  // Bounded: a stalled disk would hold the close, and the shutdown, for good (store-close.ts).
  cleanup.unshift(storeCloseStep(store, storeDir, config.storeWriteTimeoutMs, logger));
  // Where this data dir runs (prefix-guard.ts), recorded once the start holds it all: the
  // data dir's lock (service.ts) and its partitions' LevelDB LOCKs, which a node of an
  // earlier release on PIXIU_REDIS_URL holds without the former (walk38 F1).
  const layout = local === undefined ? await recordRedisPrefix(storeDir, ownership.layout, config.redisPrefix, redis.options.db ?? 0) : ownership.layout;
  stopAsked();
  // No put until this node's first lease write finds no other node serving this store
  // (ownership.advertise lifts it): a copy of this data dir started at the same time
  // passed the same start check, and both would mint the same ids meanwhile. Puts
  // made meanwhile wait for that, rather than being refused.
  store.suspendWrites('message store writes are suspended: this node is starting and does not hold its store lease yet');
  let leaseSettled: () => void = () => undefined;
  store.holdWritesUntil(new Promise<void>((resolve) => { leaseSettled = resolve; }));
  // An older copy of this data dir would mint ids again (docs/decisions.md): its
  // counters move past what the store already minted. Recorded last once it closes.
  await ownership.catchUpMinted(store);
  const unknown = await ownership.checkKnown(store, local === undefined ? () => embeddedRedisHint(config.dataDir) : undefined);
  // A move back to a prefix it ran under before: its store is known there, but what it stored meanwhile is not.
  if (movedFrom !== undefined && !unknown && store.counters.some((c) => c > 0)) {
    logger.error({ dir: config.dataDir, from: movedFrom, to: config.redisPrefix }, prefixMoveLine(movedFrom, config.redisPrefix));
  }
  // Last, once the checks above have read the counters the store recovered: a data dir
  // restored from a backup, Redis with it, would mint again the ids it minted after the
  // backup; from the clock's floor on it mints none of them, while no run mints faster
  // than the floor rises (a counter still ahead of it is logged at warn: time-floor.ts).
  const timeFloor = applyTimeFloor(store, Date.now(), logger);
  cleanup.splice(cleanup.findIndex(({ what }) => what === 'store') + 1, 0, { what: 'store counters', run: () => ownership.recordMintedNow(), redis: start.redisBound });
  // Every read of records goes through the router: other nodes' partitions are read
  // from their owners; the local store stays local.
  const records = new StoreRouter({
    local: store,
    owners: new StoreDirectory(claims),
    auth: clusterSecret,
    timeoutMs: config.peerReadTimeoutMs,
    // Records of other nodes: a quarter of the local read cache's budget.
    cacheBytes: Math.floor(config.storeCacheBytes / 4),
    logger,
    // Another store took this node's block (it was cut off while Redis lost the
    // claims): its ids may now name that store's messages, so reads go there.
    localStoreId: ownership.storeId,
    blockLost: () => ownership.blockLost,
  });
  return {
    keys, ownership, clusterSecret, store, records, layout, timeFloor, leaseSettled,
    followRedisClock: (clock) => { redisClock = clock; },
  };
}
