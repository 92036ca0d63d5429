/**
 * The service: assembles the parts in the order a message flows through them
 * (DESIGN.md §1) — Redis (or the embedded one), the message store, the inbox, the
 * gateway, ingest, the HTTP app — and takes them down on shutdown: sockets first,
 * then HTTP, then Redis, the store and the embedded redis-server.
 */
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { buildApp } from '../api/app.js';
import { ClientIdClaims } from '../cluster/client-id-claims.js';
import { Metrics } from '../api/metrics.js';
import { loadSecrets, type Secrets } from '../auth/secrets.js';
import type { Config } from '../config/config.js';
import { StartupError, isPixiuError, outageFields } from '../errors.js';
import { Inbox } from '../inbox/inbox.js';
import { Ingest } from '../ingest/ingest.js';
import type { Logger } from '../logger.js';
import { createRedis } from '../redis/client.js';
import { requireRedisVersion } from '../redis/version-check.js';
import { redisUptimeMs, warnIfEvicting, warnUnlessPersistent } from '../redis/persistence-check.js';
import { redactUrl } from '../redis/url.js';
import { embeddedRedisHint } from '../redis/embedded-hint.js';
import { startLocalRedis, type LocalRedis } from '../redis/local-server.js';
import { MessageStore } from '../store/message-store.js';
import { applyTimeFloor } from '../store/time-floor.js';
import { createVerifier } from '../auth/jwt.js';
import { Gateway } from '../gateway/gateway.js';
import { Keys } from '../redis/keys.js';
import { broadcastRoutes } from '../broadcast/routes.js';
import { channelRoutes } from '../channels/routes.js';
import { Rooms } from '../rooms/membership.js';
import { roomRoutes } from '../rooms/routes.js';
import { checkAdvertisedUrl, defaultAdvertiseUrl, refuseBadPort } from '../cluster/advertise-check.js';
import { listeningNodes } from '../cluster/bus.js';
import { ClusterSecret } from '../cluster/cluster-secret.js';
import { PartitionClaims } from '../cluster/partition-claims.js';
import { recordsRoute } from '../cluster/records-route.js';
import { StoreDirectory } from '../cluster/store-directory.js';
import { StoreOwnership } from '../cluster/store-ownership.js';
import { prefixMoveLine, refuseClusterSplit, refuseEmbeddedAfterShared } from '../cluster/prefix-guard.js';
import { nodeSecrets } from '../cluster/secret-digests.js';
import { recordRedisPrefix, recordWriter, refuseUnreadableStore, type FoundLayout } from '../store/layout.js';
import { StoreRouter } from '../cluster/store-router.js';
import { checkListenable, listenFailure } from './listen-check.js';
import { closeAll, type CloseStep } from './shutdown-steps.js';
import { buildInfo } from '../version.js';

/** A running service. */
export interface Service {
  /** `http://host:port` it listens on. */
  readonly url: string;
  readonly app: FastifyInstance;
  readonly secrets: Secrets;
  /**
   * The MsgID counters' time floor this start applied (src/store/time-floor.ts), as its
   * info line logs it: each partition whose counter was not above it mints `timeFloor + 1`
   * first; undefined when the clock gave none.
   */
  readonly timeFloor: number | undefined;
  /**
   * The drain delay (`PIXIU_DRAIN_DELAY`, src/cli/serve.ts): from now on `GET /readyz`
   * answers 503 and HTTP answers end their connection; everything else is served as
   * before. Resolves after `delayMs`, or at once when `cut` is aborted; does not stop the
   * service (call {@link close} then). Idempotent as to readiness: it stays 503.
   */
  drain(delayMs: number, cut?: AbortSignal): Promise<void>;
  /**
   * Graceful stop: stop accepting, finish requests in flight, close Redis, the store
   * and the embedded redis-server. Idempotent.
   */
  close(): Promise<void>;
  /**
   * For a process about to exit without {@link close} (a second signal): tells the
   * embedded redis-server to stop (it shuts down on its own); nothing else. Idempotent.
   */
  abandon(): void;
}

/** Options of {@link startService}. */
export interface StartOptions {
  /**
   * Aborted when the process is asked to stop while the service is still starting (a
   * signal before `pixiu listening`): the start gives up at its next step, stops what
   * it started (the embedded redis-server included) and throws {@link StartupError}.
   */
  readonly signal?: AbortSignal;
  /** Told the embedded redis-server as soon as it runs (for a forced exit during the start). */
  readonly onLocalRedis?: (local: LocalRedis) => void;
  /**
   * The store layout of `<dataDir>/xiu` as the caller's own start check read it
   * (serve.ts: `refuseUnreadableStore`); default: read here.
   */
  readonly layout?: FoundLayout;
}

/**
 * Starts the service and resolves once it listens.
 *
 * @param given secrets resolved already (serve.ts does, to show generated ones before
 *   anything can fail); default: resolved here with `loadSecrets`
 * @throws StartupError when Redis cannot be reached or started, a store partition
 *   cannot be opened, or the port cannot be bound, or `opts.signal` is aborted; what
 *   was started is stopped again
 */
export async function startService(config: Config, logger: Logger, given?: Secrets, opts: StartOptions = {}): Promise<Service> {
  const cleanup: CloseStep[] = [];
  const stopAsked = (): void => {
    if (opts.signal?.aborted === true) throw new StartupError('stopped by a signal while starting');
  };
  // A step that waits on Redis: a command or two, each bounded by the command timeout;
  // all of them together get three (shutdown-steps.ts).
  const redisBound = { boundMs: 2 * config.redisCommandTimeoutMs + 1000 };
  const redisBudgetMs = 3 * config.redisCommandTimeoutMs + 1000;
  try {
    // Before anything is started, written or claimed (listen-check.ts; layout.ts: a
    // store a newer release wrote). The layout is read once here (or by the caller) and
    // passed along: every later step of the start checks or updates that one value.
    stopAsked();
    const storeDir = path.join(config.dataDir, 'xiu');
    const found = opts.layout?.dir === storeDir ? opts.layout : await refuseUnreadableStore(storeDir);
    await checkListenable(config.host, config.port);
    const secrets = given ?? await loadSecrets(config);
    stopAsked();

    let local: LocalRedis | undefined;
    let redisUrl = config.redisUrl;
    if (redisUrl === undefined) {
      // A data dir of a cluster started without its Redis URL would be an island (prefix-guard.ts).
      refuseEmbeddedAfterShared(config.dataDir, found);
      local = await startLocalRedis({ dataDir: config.dataDir, logger });
      redisUrl = local.url;
      const stopLocal = local.stop;
      cleanup.unshift({ what: 'local redis-server', run: stopLocal });
      opts.onLocalRedis?.(local);
      stopAsked();
    }
    const metrics = new Metrics();
    let redis: Redis;
    try {
      redis = await createRedis({ url: redisUrl, commandTimeoutMs: config.redisCommandTimeoutMs, name: 'pixiu', logger });
    } catch (err) {
      // createRedis's message names the URL without its password, and the reason.
      throw new StartupError((err as Error).message, { cause: err });
    }
    redis.on('error', () => metrics.redisErrors.inc({ kind: 'connection' }));
    cleanup.unshift({ what: 'redis', run: () => redis.quit().catch(() => redis.disconnect()), redis: { ...redisBound, giveUp: () => redis.disconnect() } });
    stopAsked();
    await requireRedisVersion(redis, redactUrl(redisUrl));
    if (local === undefined) {
      await warnUnlessPersistent(redis, redactUrl(redisUrl), logger);
      await warnIfEvicting(redis, redactUrl(redisUrl), logger);
    }

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
    const ownership = await StoreOwnership.claim({
      claims, dir: storeDir, partitions: config.partitions, layout: found, logger,
      settleMs: local === undefined ? config.claimsSettleMs : 0, runningNodes: () => listeningNodes(redis, keys),
      redisUptimeMs: () => redisUptimeMs(redis),
      redisName: `${redactUrl(redisUrl)}, key prefix "${config.redisPrefix}"`,
    });
    const layout = local === undefined ? await recordRedisPrefix(storeDir, ownership.layout, config.redisPrefix, redis.options.db ?? 0) : ownership.layout;
    const clusterSecret = await ClusterSecret.load(redis, keys);
    stopAsked();

    const store = await MessageStore.open({
      dir: storeDir,
      partitions: config.partitions,
      partitionBase: ownership.partitionBase,
      layout,
      sync: config.storeDurability === 'fsync',
      cacheBytes: config.storeCacheBytes,
      defaultTtlMs: config.messageTtlMs,
      maxMessageBytes: config.maxMessageBytes,
      sweepIntervalMs: config.sweepIntervalMs,
      logger,
      onBatch: (size, ms) => metrics.observeBatch(size, ms),
      onWriteFailure: () => metrics.storeWriteFailures.inc(),
      onUnreadable: () => metrics.storeUnreadableRecords.inc(),
    });
    cleanup.unshift({ what: 'store', run: () => store.close() });
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
    cleanup.splice(cleanup.findIndex(({ what }) => what === 'store') + 1, 0, { what: 'store counters', run: () => ownership.recordMintedNow(), redis: redisBound });
    // Every read of records goes through the router: other nodes' partitions are read
    // from their owners; the local store stays local.
    const records = new StoreRouter({
      local: store,
      owners: new StoreDirectory(claims),
      auth: clusterSecret,
      timeoutMs: config.redisCommandTimeoutMs,
      // Records of other nodes: a quarter of the local read cache's budget.
      cacheBytes: Math.floor(config.storeCacheBytes / 4),
      logger,
      // Another store took this node's block (it was cut off while Redis lost the
      // claims): its ids may now name that store's messages, so reads go there.
      localStoreId: ownership.storeId,
      blockLost: () => ownership.blockLost,
    });

    // Presence entries are judged live at append by the clock they are written on (Redis's,
    // the gateway's node registry): a node's own clock, off by more than an entry's time
    // left, found every entry expired and notified no node.
    let redisNow: () => number = Date.now;
    const inbox = new Inbox(redis, {
      prefix: config.redisPrefix, cap: config.inboxCap, deviceCursors: config.maxDeviceCursors, now: () => redisNow(), logger,
    });
    const verify = createVerifier(secrets.jwt, {
      audience: config.jwtAudience, issuer: config.jwtIssuer, onKeysUnavailable: () => metrics.tokenKeysUnavailable.inc(), logger,
    });
    const gateway = await Gateway.start({
      config, redis, redisUrl, keys, inbox, store: records, verify, logger, metrics, storeId: ownership.storeId, storeLeftBehind: ownership.leftBehind,
      // Compared across nodes sharing a Redis; the embedded one (a socket in the data dir) has no other node, so no scrypt at its start.
      ...(local === undefined ? { secrets: await nodeSecrets(secrets, config) } : {}),
      // Redis lost its data: the cluster secret is written back (this node's copy, unless
      // another node already wrote one), not only when another node is refused.
      onRegisteredAgain: () => void clusterSecret.writeBack().catch((err: unknown) =>
        logger.warn({ ...outageFields(err) }, 'could not write the cluster secret back to Redis; other nodes re-read it when refused')),
    });
    redisNow = () => gateway.redisNow();
    // With the store lease (dropped only if this node holds it): one wait on a hung Redis, not two.
    cleanup.unshift({ what: 'gateway and store lease', run: () => Promise.all([gateway.close(), ownership.stop()]), redis: redisBound });
    const rooms = new Rooms(redis, keys, config.roomSizeCap);
    // client_msg_id across the stores sharing this Redis (DESIGN.md §3, §9).
    const clientIds = new ClientIdClaims(redis, keys, ownership.storeId, logger);
    await clientIds.start();
    cleanup.unshift({ what: 'client id claims', run: () => Promise.resolve(clientIds.stop()) });
    stopAsked();
    const ingest = new Ingest({
      store, inbox, rooms, claims: clientIds, records,
      onAppended: (user, append, entry, record) => gateway.appended(user, append, entry, record),
    });
    let draining = false;
    const app = await buildApp({
      config, store: records, inbox, ingest, redis, metrics, apiToken: secrets.apiToken,
      writeProblem: () => store.writeProblem, draining: () => draining,
      extend: async (root, producerScope) => {
        await recordsRoute(root, { store, storeId: ownership.storeId, secret: clusterSecret });
        await gateway.register(root, producerScope);
        await producerScope((scope) => {
          roomRoutes(scope, rooms);
          broadcastRoutes(scope, { store, stream: gateway.broadcastStream, claims: clientIds, records }, metrics);
          channelRoutes(scope, gateway.channelStream, { maxMessageBytes: config.maxMessageBytes }, metrics);
        });
      },
    }, logger);
    // Shutdown order (DESIGN.md §6): first stop accepting — new handshakes refused and
    // every socket closed 1001, waiting on nothing — then HTTP stops accepting (new
    // requests 503) and finishes what is in flight, then together the store lease is
    // dropped and the cursors flushed, and last the store and Redis (shutdown-steps.ts
    // bounds what waits on Redis). Nothing that waits on Redis comes before the HTTP side
    // stops accepting: with Redis hung, each such step waits a command timeout, and
    // the node took new work for all of that time (a fresh-user finding).
    cleanup.unshift({ what: 'connections', run: () => Promise.resolve(gateway.stopAccepting()) });
    cleanup.splice(1, 0, {
      what: 'http',
      run: () => {
        app.stopTakingRequests();
        return app.close();
      },
    });
    stopAsked();
    try {
      await app.listen({ host: config.host, port: config.port });
    } catch (err) {
      throw listenFailure(config.host, config.port, err);
    }
    const addr = app.server.address();
    const port = typeof addr === 'object' && addr !== null ? addr.port : config.port;
    const host = config.host.includes(':') ? `[${config.host}]` : config.host;
    const url = `http://${host}:${port}`;
    // The lease: where other nodes read this store, from now until shutdown. Dropped
    // once HTTP has stopped, so readers stop waiting on this node at once.
    const advertised = config.advertiseUrl ?? defaultAdvertiseUrl(config.host, port);
    try {
      await checkAdvertisedUrl({
        url: advertised, storeId: ownership.storeId, authHeader: clusterSecret.header, logger, signal: opts.signal, alone: local !== undefined,
      });
      stopAsked();
      await ownership.advertise({ url: advertised, node: gateway.node }, (reason) => store.suspendWrites(reason), store);
    } finally {
      leaseSettled();
    }
    // This node holds its store's lease and serves it from now on: its LAYOUT names this
    // build as the last that served it (README "Upgrades"). For the operator's eyes
    // only: a failed write is logged and does not stop the start.
    await recordWriter(storeDir, layout).catch((err: unknown) => logger.warn({ err }, 'could not record this build as writtenBy in the store layout'));
    // A stop asked for during the lease write or the LAYOUT's (the last steps that wait): nothing
    // awaits after this, so the caller never gets a service it was asked to stop.
    stopAsked();
    // Redis back after an outage: claims and lease are written back at once, so other
    // nodes read this store's records again without waiting for the next renewal.
    redis.on('ready', () => ownership.renewNow());
    // Which build runs (src/version.ts): what `pixiu --version` prints, for telling releases apart in the log.
    const build = buildInfo();
    logger.info({ url, advertised, redis: redactUrl(redisUrl), redisPrefix: config.redisPrefix, dataDir: config.dataDir, partitions: config.partitions,
      partitionBase: ownership.partitionBase, version: build.version, commit: build.commit }, 'pixiu listening');
    let closing: Promise<void> | undefined;
    if (verify.prefetch) prefetchJwks(verify.prefetch, logger, () => closing !== undefined);
    return {
      url,
      app,
      secrets,
      timeFloor,
      drain: (delayMs, cut) => {
        draining = true;
        // Cut short by `cut`: its AbortError ends the wait, as the delay's end does.
        return delay(delayMs, undefined, { signal: cut }).catch(() => undefined);
      },
      close: () => (closing ??= closeAll(logger, cleanup, redisBudgetMs).then(() => logger.info('pixiu stopped'))),
      abandon: () => local?.terminate(),
    };
  } catch (err) {
    await closeAll(logger, cleanup, redisBudgetMs);
    if (err instanceof StartupError) throw err;
    if (isPixiuError(err)) throw new StartupError(err.message, { cause: err });
    throw err;
  }
}

/**
 * Fetches the JWKS once the node listens, not awaited (an identity provider that is
 * slow or down does not hold the start): a wrong `PIXIU_JWKS_URL` is logged at once, a
 * warning naming the URL and the fault, where it was found at the first client (a
 * fresh tester's finding); a good one is logged with its number of usable keys, and
 * the first client need not wait for the fetch. Nothing is logged once the node
 * began to stop (`stopped`).
 */
function prefetchJwks(prefetch: () => Promise<number>, logger: Logger, stopped: () => boolean): void {
  // jose's fetch cannot be aborted: one that ends after the node stopped says nothing.
  prefetch().then(
    (keys) => { if (!stopped()) logger.info({ keys }, 'JWKS fetched'); },
    (err: unknown) => { if (!stopped()) logger.warn({ ...outageFields(err) }, 'cannot fetch the JWKS: clients are refused 503 until it can be fetched'); },
  );
}
