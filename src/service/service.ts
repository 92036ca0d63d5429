/**
 * The service: assembles the parts in the order a message flows through them
 * (DESIGN.md §1) — Redis (or the embedded one: redis-start.ts), the message store
 * (store-start.ts), the inbox, the gateway, ingest, the HTTP app — and takes them down
 * on shutdown: sockets first, then HTTP, then Redis, the store (its close bounded:
 * store-close.ts), the embedded redis-server and last the data dir's lock, which the
 * start took before any Redis (src/redis/dir-lock.ts; shutdown-steps.ts).
 */
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../api/app.js';
import { ClientIdClaims } from '../cluster/client-id-claims.js';
import { Metrics } from '../api/metrics.js';
import { loadSecrets, type Secrets } from '../auth/secrets.js';
import type { Config } from '../config/config.js';
import { StartupError, isPixiuError, outageFields } from '../errors.js';
import { commandRefusal } from '../redis/command-refusal.js';
import { Inbox } from '../inbox/inbox.js';
import { InboxGeneration } from '../inbox/generation.js';
import { Ingest } from '../ingest/ingest.js';
import type { Logger } from '../logger.js';
import { redactUrl } from '../redis/url.js';
import type { LocalRedis } from '../redis/local-server.js';
import { createVerifier } from '../auth/jwt.js';
import { Gateway } from '../gateway/gateway.js';
import { broadcastRoutes } from '../broadcast/routes.js';
import { channelRoutes } from '../channels/routes.js';
import { Rooms } from '../rooms/membership.js';
import { roomRoutes } from '../rooms/routes.js';
import { checkAdvertisedUrl, defaultAdvertiseUrl } from '../cluster/advertise-check.js';
import { warnLeavingOthers } from '../cluster/leaving-others.js';
import { recordsRoute } from '../cluster/records-route.js';
import { nodeSecrets } from '../cluster/secret-digests.js';
import { recordWriter, refuseUnreadableStore, type FoundLayout } from '../store/layout.js';
import { checkListenable, listenFailure } from './listen-check.js';
import { lockDataDir } from '../redis/dir-lock.js';
import { startRedis } from './redis-start.js';
import { StartStallFailure, StartStallWait, startStallFailure, type StallThen } from './start-stall.js';
import { closeAll, type CloseStep } from './shutdown-steps.js';
import type { StartContext } from './start-context.js';
import { startStore } from './store-start.js';
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
   * @returns the shutdown steps given up past their own bound (`['store']`: the store's
   *   close did not end in its time, a stalled disk: store-close.ts), after every other
   *   step ran; empty after a clean stop
   */
  close(): Promise<readonly string[]>;
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
  /** The clock of the operations routes' node-wide rates (ApiDeps.opsClock); a test's own. */
  readonly opsClock?: () => number;
}

/**
 * Starts the service and resolves once it listens.
 *
 * A Redis that stalls in a later step of the start, on a shared Redis, is waited for:
 * what the start started is stopped, and it runs again once Redis answers, within the
 * start's one budget for stalls (start-stall.ts, where the steps not run again are named).
 *
 * @param given secrets resolved already (serve.ts does, to show generated ones before
 *   anything can fail); default: resolved here with `loadSecrets` (by each run: a second
 *   one reads those the first generated)
 * @throws StartupError when the data dir is in use (its lock held by another start:
 *   src/redis/dir-lock.ts), Redis cannot be reached or started, a store partition
 *   cannot be opened, or the port cannot be bound, or `opts.signal` is aborted; what
 *   was started is stopped again
 */
export async function startService(config: Config, logger: Logger, given?: Secrets, opts: StartOptions = {}): Promise<Service> {
  const stopAsked = (): void => {
    if (opts.signal?.aborted === true) throw new StartupError('stopped by a signal while starting');
  };
  const stalls = new StartStallWait(logger, stopAsked);
  for (;;) {
    try {
      return await startOnce(config, logger, given, opts, { stopAsked, stalls });
    } catch (err) {
      const again = err instanceof StartStallFailure && runsAgain(config, err.step);
      if (!again || !(await stalls.again(err, RUN_AGAIN, { redisUrl: redactUrl(config.redisUrl), step: err.step }))) throw err;
    }
  }
}

/** What the start does on a stall in a step {@link runsAgain} names, for its warn line (start-stall.ts). */
const RUN_AGAIN: StallThen = 'stops what it started and runs again once Redis answers';

/**
 * Whether a start run that failed on a Redis stall in `step` is run again: not when
 * its own waits are spent (connecting), after it listens (the lease), or with the
 * embedded Redis (start-stall.ts).
 */
function runsAgain(config: Config, step: string): config is Config & { redisUrl: string } {
  return config.redisUrl !== undefined && step !== 'connecting to Redis' && step !== 'taking the store lease';
}

/**
 * One run of the start ({@link startService}).
 * @param shared the stop check and the stall waits, shared by every run of one start
 * @throws StartStallFailure when it failed on a Redis stall; else as {@link startService}
 */
async function startOnce(config: Config, logger: Logger, given: Secrets | undefined, opts: StartOptions,
  shared: Pick<StartContext, 'stopAsked' | 'stalls'>): Promise<Service> {
  const cleanup: CloseStep[] = [];
  const { stopAsked } = shared;
  // A step that waits on Redis: a command or two, each bounded by the command timeout;
  // all of them together get three (shutdown-steps.ts).
  const redisBound = { boundMs: 2 * config.redisCommandTimeoutMs + 1000 };
  const redisBudgetMs = 3 * config.redisCommandTimeoutMs + 1000;
  const start: StartContext = { config, logger, cleanup, redisBound, ...shared };
  // The step under way and the Redis it waits on, named by a start that fails on a
  // Redis stall (start-stall.ts; README "A Redis that stalls while a node starts").
  let step = 'checking the data dir';
  let shownRedis = config.redisUrl === undefined ? 'the embedded redis-server' : redactUrl(config.redisUrl);
  const during = <T>(what: string, run: () => Promise<T>): Promise<T> => {
    step = what;
    return run();
  };
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
    // The data dir's lock, held until this process stops (the shutdown's last step): taken
    // before the start starts or reaches any Redis, claims the data dir's partitions there,
    // or records in its LAYOUT where it runs. A second start on it, with either kind of Redis, stops
    // here having written none of that (dir-lock.ts; walk38 F1).
    const lock = await lockDataDir(config.dataDir);
    cleanup.push({ what: 'data dir lock', run: () => lock.close() });
    stopAsked();

    // Redis, embedded or shared (redis-start.ts), then the data dir's store: its block of
    // MsgID partitions claimed, opened and made safe to serve (store-start.ts).
    const metrics = new Metrics();
    const started = await during('connecting to Redis', () => startRedis(start, found, metrics, opts.onLocalRedis));
    const { redis, url: redisUrl, local } = started;
    shownRedis = redactUrl(redisUrl);
    const { keys, ownership, clusterSecret, store, records, layout, timeFloor, leaseSettled, followRedisClock } = await during('claiming the store',
      () => startStore(start, started, storeDir, found, metrics));

    // Presence entries are judged live at append by the clock they are written on (Redis's,
    // the gateway's node registry): a node's own clock, off by more than an entry's time
    // left, found every entry expired and notified no node.
    let redisNow: () => number = Date.now;
    // Raised when Redis went back in time; read now and at every registry renewal, given
    // to every append (generation.ts; docs/decisions.md "The inbox generation").
    const generation = new InboxGeneration(redis, keys, logger);
    await during('reading the inbox generation', () => generation.refresh());
    const inbox = new Inbox(redis, {
      prefix: config.redisPrefix, cap: config.inboxCap, deviceCursors: config.maxDeviceCursors, now: () => redisNow(), logger,
      generation: () => generation.current,
    });
    const verify = createVerifier(secrets.jwt, {
      audience: config.jwtAudience, issuer: config.jwtIssuer, onKeysUnavailable: () => metrics.tokenKeysUnavailable.inc(), logger,
    });
    const gateway = await during('registering the node and connecting its bus', async () => Gateway.start({
      config, redis, renewals: started.renewals, redisUrl, keys, inbox, store: records, verify, logger, metrics, storeId: ownership.storeId, storeLeftBehind: ownership.leftBehind,
      // Compared across nodes sharing a Redis; the embedded one (a socket in the data dir) has no other node, so no scrypt at its start.
      ...(local === undefined ? { secrets: await nodeSecrets(secrets, config) } : {}),
      // Redis lost its data: the cluster secret is written back (this node's copy, unless
      // another node already wrote one), not only when another node is refused.
      onRegisteredAgain: () => void clusterSecret.writeBack().catch((err: unknown) =>
        logger.warn({ ...outageFields(err) }, 'could not write the cluster secret back to Redis; other nodes re-read it when refused')),
      onRenewed: () => void generation.refresh().catch((err: unknown) =>
        logger.debug({ ...outageFields(err) }, 'could not read the inbox generation; read again at the next registry renewal')),
    }));
    redisNow = () => gateway.redisNow();
    // Sweeps wait for it, and never cut past it (a node started with its clock ahead: walk31 F2).
    followRedisClock(() => gateway.redisClock());
    // With the store lease (dropped only if this node holds it): one wait on a hung Redis, not two.
    cleanup.unshift({ what: 'gateway and store lease', run: () => Promise.all([gateway.close(), ownership.stop()]), redis: redisBound });
    const rooms = new Rooms(redis, keys, config.roomSizeCap);
    // client_msg_id across the stores sharing this Redis (DESIGN.md §3, §9).
    // A claim's expiry is given on Redis's clock, which expires it (the registry's offset).
    const clientIds = new ClientIdClaims(redis, keys, ownership.storeId, logger, () => gateway.redisNow());
    await during('reading the client_msg_id claims', () => clientIds.start());
    cleanup.unshift({ what: 'client id claims', run: () => Promise.resolve(clientIds.stop()) });
    stopAsked();
    const ingest = new Ingest({
      store, inbox, rooms, claims: clientIds, records,
      onAppended: (user, append, entry, record) => gateway.appended(user, append, entry, record),
    });
    let draining = false;
    const app = await during('building the HTTP API', () => buildApp({
      config, store: records, inbox, ingest, redis, metrics, apiToken: secrets.apiToken,
      writeProblem: () => store.writeProblem, draining: () => draining, opsClock: opts.opsClock,
      extend: async (root, producerScope) => {
        await recordsRoute(root, { store, storeId: ownership.storeId, secret: clusterSecret });
        await gateway.register(root, producerScope);
        await producerScope((scope) => {
          roomRoutes(scope, rooms);
          broadcastRoutes(scope, { store, stream: gateway.broadcastStream, claims: clientIds, records }, metrics);
          channelRoutes(scope, gateway.channelStream, { maxMessageBytes: config.maxMessageBytes }, metrics);
        });
      },
    }, logger));
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
    step = 'listening';
    try {
      await app.listen({ host: config.host, port: config.port, backlog: config.listenBacklog });
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
    step = 'taking the store lease';
    try {
      await checkAdvertisedUrl({
        url: advertised, storeId: ownership.storeId, authHeader: clusterSecret.header, logger, signal: opts.signal, alone: local !== undefined,
      });
      stopAsked();
      await ownership.advertise({ url: advertised, node: gateway.node }, (reason) => store.suspendWrites(reason), store,
        (reason) => void generation.lostWrites(reason));
    } finally {
      leaseSettled();
    }
    // This node holds its store's lease and serves it from now on: its LAYOUT names this
    // build as the last that served it (README "Upgrades"). For the operator's eyes
    // only: a failed write is logged and does not stop the start.
    step = 'recording this build in the store layout';
    await recordWriter(storeDir, layout).catch((err: unknown) => logger.warn({ err }, 'could not record this build as writtenBy in the store layout'));
    // A stop asked for during the lease write or the LAYOUT's (the last steps that wait): nothing
    // awaits after this, so the caller never gets a service it was asked to stop.
    stopAsked();
    // Redis back after an outage: claims and lease are written back at once, so other
    // nodes read this store's records again without waiting for the next renewal.
    // Its lease and claim checks run before the inbox generation is read again (at the
    // next registry renewal): a loss they see raises past the generation this node
    // holds, even when Redis's went back below it (generation.ts lostWrites).
    started.renewals.on('ready', () => ownership.renewNow());
    // Which build runs (src/version.ts): what `pixiu --version` prints, for telling releases apart in the log.
    const build = buildInfo();
    logger.info({ url, advertised, redis: redactUrl(redisUrl), redisPrefix: config.redisPrefix, dataDir: config.dataDir, partitions: config.partitions,
      partitionBase: ownership.partitionBase, version: build.version, commit: build.commit,
      // The proxies whose X-Forwarded-For names the client, as read (empty entries skipped): walk36 F3.
      ...(config.trustProxy.length > 0 ? { trustProxy: config.trustProxy } : {}) }, 'pixiu listening');
    let closing: Promise<readonly string[]> | undefined;
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
      // Other nodes left waiting on this store are warned of at once, beside the shutdown
      // (a registry read, not waited on before HTTP stops accepting; leaving-others.ts).
      close: () => (closing ??= Promise.all([
        gateway.otherNodes().then((others) => warnLeavingOthers(logger, others, {
          storeId: ownership.storeId, dataDir: config.dataDir, partitionBase: ownership.partitionBase, partitions: config.partitions,
        })),
        closeAll(logger, cleanup, redisBudgetMs),
      ]).then(([, unfinished]) => {
        // Logged whatever was left undone (the process is stopped all the same); what was is at warn.
        if (unfinished.length === 0) logger.info('pixiu stopped');
        else logger.warn({ unfinished }, 'pixiu stopped');
        return unfinished;
      })),
      abandon: () => local?.terminate(),
    };
  } catch (err) {
    // A stall to run again for: its wait counts, and is warned of, from now, not after the
    // undo, which waits on the stalled Redis too (walk33 M-start; start-stall.ts `met`).
    if (runsAgain(config, step)) shared.stalls.met(err, RUN_AGAIN, { redisUrl: redactUrl(config.redisUrl), step });
    await closeAll(logger, cleanup, redisBudgetMs);
    // A Redis stall past the start's waits for one (start-stall.ts: its 30 s spent), or in a
    // step not run again (the store lease; any with the embedded Redis): named with its step.
    const stalled = startStallFailure(err, step, shownRedis, config.redisCommandTimeoutMs);
    if (stalled !== undefined) throw stalled;
    if (err instanceof StartupError) throw err;
    // A command Redis refuses for good (NOPERM, renamed away): said so, not "retry later".
    const refused = commandRefusal(err);
    if (refused !== undefined) throw new StartupError(refused, { cause: err });
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
