/**
 * The gateway: WebSocket delivery end to end (DESIGN.md §5, §6, §9). Assembles the
 * local hub of user sessions, presence, this node's membership of the cluster
 * (node-membership.ts: the node registry, its shared settings) and the node bus, and
 * registers the gateway routes. Ingest calls {@link Gateway.appended} after each
 * inbox append: a local user's session is woken in-process, other nodes holding the
 * user get a Pub/Sub notify. Heartbeats pull, so a lost notify costs latency only.
 */
import websocket from '@fastify/websocket';
import { answerUpgradeIds } from './upgrade-request-id.js';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { ClientClaims, TokenVerifier } from '../auth/jwt.js';
import { BroadcastStream } from '../broadcast/broadcast-stream.js';
import { BroadcastFanout } from '../broadcast/fanout.js';
import { BroadcastReader } from '../broadcast/reader.js';
import { ChannelHub } from '../channels/channel-hub.js';
import { ChannelStream } from '../channels/channel-stream.js';
import { Bus } from '../cluster/bus.js';
import { ClockSkewWatch } from '../cluster/clock-skew.js';
import { NodeMembership } from '../cluster/node-membership.js';
import { newNodeId, type NodeRegistry } from '../cluster/node-registry.js';
import type { NodeSecrets } from '../cluster/secret-digests.js';
import { Presence, type ReplacedEntry } from '../cluster/presence.js';
import type { Config } from '../config/config.js';
import { Hub } from '../delivery/hub.js';
import { TURN_FRAMES } from '../delivery/send-turns.js';
import type { AppendResult, Inbox, InboxEntry } from '../inbox/inbox.js';
import type { Logger } from '../logger.js';
import { createRedis } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';
import { redactUrl } from '../redis/url.js';
import type { RecordReader } from '../store/record-reader.js';
import type { StoredMessage } from '../store/record.js';
import type { ProducerScope } from '../api/deps.js';
import type { Metrics } from '../api/metrics.js';
import { ConnectionClock } from './connection-clock.js';
import { connectRoute } from './connect-route.js';
import { corkFlushBytes } from './tick-cork.js';
import { BufferBudget, budgetFloorBytes, resolveBufferBudget } from './buffer-budget.js';
import { guardUpgrades } from './upgrade-guard.js';
import { connectionBound } from './connection-bound.js';
import { boundSockets } from './socket-bound.js';
import type { GatewayDeps } from './gateway-deps.js';
import { Kicks } from './kicks.js';
import { meRoutes } from './me-routes.js';
import { PendingHandshakes } from './pending-handshakes.js';
import { refreshOnHeartbeat } from './presence-heartbeat.js';
import { presenceRoutes } from './presence-routes.js';
import { wakeOtherNodes } from './rotation-wake.js';
import { CloseCode, closeCodeLabel } from '../delivery/close-codes.js';
import type { ConnectionDeps } from './gateway-deps.js';
import type { WsConnection } from './ws-connection.js';
import { LogThrottle, OUTAGE_LOG_INTERVAL_MS } from '../log-throttle.js';
import type { GatewayOptions } from './gateway-options.js';
import { CloseLogThinning } from './close-log.js';

/** Wait before pulling again after a failed fetch, ms. */
const FETCH_RETRY_MS = 1000;
/** After Redis reconnects, every connection's next heartbeat comes within this, ms (spread at random). */
const RECONNECT_HEARTBEAT_SPREAD_MS = 1000;
export type { GatewayOptions } from './gateway-options.js';

/** The running gateway of this node. */
export class Gateway implements GatewayDeps {
  readonly node: string;
  readonly config: Config;
  /** The bound on this node's WebSockets (PIXIU_MAX_CONNECTIONS), resolved and logged at start (connection-bound.ts). */
  readonly maxConnections: number;
  /** The bound on all its sockets, WebSockets and HTTP connections together (socket-bound.ts). */
  readonly maxSockets: number;
  readonly inbox: Inbox;
  readonly store: RecordReader;
  readonly verify: TokenVerifier;
  readonly presence: Presence;
  readonly hub: Hub;
  readonly logger: Logger;
  readonly state = { accepting: true };
  readonly handshakes = new PendingHandshakes();
  readonly connection: ConnectionDeps;
  /** The broadcast stream every node reads (DESIGN.md §8). */
  readonly broadcastStream: BroadcastStream;
  /** Channel publishing and history (DESIGN.md §8). */
  readonly channelStream: ChannelStream;
  /** This node in the cluster: its registration, the log of the others, its shared settings (node-membership.ts). */
  readonly #membership: NodeMembership;
  /** The membership's node registry. */
  readonly #registry: NodeRegistry;
  readonly #bus: Bus;
  readonly #subscriber: Redis;
  /** The connections open here (opened and not yet closed). */
  readonly #open = new Set<WsConnection>();
  readonly #metrics: Metrics;
  readonly #fanout: BroadcastFanout;
  readonly #reader: BroadcastReader;
  readonly #channelHub: ChannelHub;
  readonly #kicks: Kicks;

  private constructor(opts: GatewayOptions, node: string, subscriber: Redis, readerRedis: Redis) {
    const { config, redis, keys, logger, metrics } = opts;
    this.node = node;
    this.config = config;
    ({ webSockets: this.maxConnections, sockets: this.maxSockets } = connectionBound(config, logger));
    metrics.wsConnectionsMax.set(this.maxConnections);
    this.inbox = opts.inbox;
    this.store = opts.store;
    this.verify = opts.verify;
    this.logger = logger;
    this.#metrics = metrics;
    this.#subscriber = subscriber;
    const skew = new ClockSkewWatch(logger, (seconds) => metrics.setClockOffset(seconds), config.redisUrl === undefined ? undefined : redactUrl(config.redisUrl));
    this.#membership = new NodeMembership({
      redis, renewals: opts.renewals, keys, node, logger, secrets: opts.secrets,
      onRenewed: (nodes) => {
        metrics.clusterNodes.set(nodes);
        opts.onRenewed?.();
      },
      // How far this node's clock is from Redis's: a gauge, and a warning beyond a second.
      onClock: (reading) => skew.observe(reading),
      // Registered again after a lapse or a FLUSHALL: this node's presence entries were
      // pruned by other nodes (or dropped with the data); written back now, not at each
      // connection's next heartbeat (up to PIXIU_HEARTBEAT without notifies, shown
      // offline and not counted against the connection limit).
      onRegisteredAgain: () => {
        this.#heartbeatAllSoon();
        opts.onRegisteredAgain?.();
      },
    });
    this.#registry = this.#membership.registry;
    this.presence = new Presence(redis, keys, {
      node,
      // Refreshed every heartbeat; two missed heartbeats and a margin make it lapse.
      ttlMs: config.heartbeatMs * 2 + 5000,
      maxPerUser: config.maxConnectionsPerUser,
      liveNodes: (nodes) => this.#registry.liveAmong(nodes),
      // Entries expire by Redis's clock, as registrations do: one clock for every node.
      now: () => this.#registry.now(),
      // A handshake answered 503 whose add Redis ran anyway: what it replaced is told now.
      onUnansweredReplaced: (user, replaced) => {
        logger.info({ user, conns: replaced.map((r) => r.conn) }, 'closing connections a handshake answered 503 replaced (its presence add ran, its reply was lost)');
        this.kickReplaced(user, replaced);
      },
    });
    metrics.readPresenceRemovals(() => this.presence.pendingRemovals);
    this.hub = new Hub({
      inbox: opts.inbox,
      store: opts.store,
      logger,
      retryMs: FETCH_RETRY_MS,
      machine: {
        window: config.deliveryWindow,
        ackTimeoutMs: config.ackTimeoutMs,
        backoffMs: config.redeliveryBackoffMs,
        heartbeatMs: config.heartbeatMs,
      },
      onFetch: () => metrics.delivery.fetches.inc(),
      onLiveMsg: (tsMs) => metrics.delivery.observeLag(tsMs),
      onGap: (gap) => metrics.delivery.countGap(gap),
      onFetchFailed: (read) => metrics.delivery.countFetchFailure(read),
      onStalled: (stalled) => (stalled ? metrics.delivery.stalledUsers.inc() : metrics.delivery.stalledUsers.dec()),
      onAckWrites: (written, failed) => metrics.countAckWrites(written, failed),
      ackFailureLog: new LogThrottle(OUTAGE_LOG_INTERVAL_MS),
      fetchFailureLog: new LogThrottle(OUTAGE_LOG_INTERVAL_MS),
      resumeRotationLog: new LogThrottle(OUTAGE_LOG_INTERVAL_MS),
      resumeKeptLog: new LogThrottle(OUTAGE_LOG_INTERVAL_MS),
      onRotated: (user) => { if (config.notify) wakeOtherNodes({ node, presence: this.presence, bus: this.#bus, logger }, user); },
    }, config.ackFlushIntervalMs); // ack cursors are written at most this often per user (DESIGN.md §5)
    this.#bus = new Bus({
      node, redis, subscriber, keys, logger,
      onNotify: (user, seq, id) => this.hub.notify(user, seq, id),
      onKick: (kick) => this.#kicks.local(kick),
      onGone: (gone, users) => {
        // No subscriber got the notify. A node still registered is not gone: its
        // subscriber may be reconnecting (Redis restarted), and dropping its presence
        // would leave its users without notifies until their next heartbeat.
        this.#registry.isRegistered(gone).then((registered) => {
          if (!registered) for (const u of users) void this.presence.removeNode(u, gone).catch(() => undefined);
        }, () => undefined);
      },
      // The subscriber is back: notifies published meanwhile were lost.
      onResubscribed: () => this.#heartbeatAllSoon(),
    });
    this.#kicks = new Kicks({
      node, bus: this.#bus, registry: this.#registry, presence: this.presence, handshakes: this.handshakes,
      hub: this.hub, accepting: () => this.state.accepting, logger,
    });
    // A broadcast's marker expires with the stored broadcast, on Redis's clock (the registry's offset).
    this.broadcastStream = new BroadcastStream(redis, keys, config.broadcastStreamCap, () => this.#registry.now());
    this.channelStream = new ChannelStream(redis, keys, config.channelHistory, config.channelHistoryTtlMs, logger);
    this.#fanout = new BroadcastFanout({
      framesPerSecond: config.broadcastRate,
      chunkFrames: TURN_FRAMES,
      maxBatchBytes: Math.max(64 * 1024, Math.floor(config.socketHighWaterBytes / 2)),
      position: () => this.#reader.position,
    });
    this.#reader = new BroadcastReader({
      redis: readerRedis,
      stream: this.broadcastStream,
      logger,
      onEntries: (entries) => this.#fanout.deliver(entries),
      onLost: (range) => {
        metrics.broadcastLosses.inc();
        return this.#fanout.deliverLost(range);
      },
    });
    this.#channelHub = new ChannelHub(subscriber, this.channelStream, keys, logger);
    // Redis is back after an outage: presence may be lost, inboxes may have changed.
    redis.on('ready', () => {
      this.#heartbeatAllSoon();
      void this.presence.retryRemovals();
    });
    this.connection = {
      config,
      corkFlushBytes: corkFlushBytes(config.socketHighWaterBytes),
      bufferBudget: metrics.wsBuffers.watch(new BufferBudget(resolveBufferBudget(config.socketBufferBudgetBytes, logger),
        budgetFloorBytes(config.socketHighWaterBytes), logger, () => metrics.wsBuffers.budgetPauses.inc(), () => metrics.wsBuffers.budgetCloses.inc())),
      clock: new ConnectionClock(ConnectionClock.tickFor(config.heartbeatMs)),
      broadcast: { fanout: this.#fanout, stream: this.broadcastStream, catchUpFailureLog: new LogThrottle(OUTAGE_LOG_INTERVAL_MS) },
      channels: { hub: this.#channelHub, stream: this.channelStream, subFailureLog: new LogThrottle(OUTAGE_LOG_INTERVAL_MS), onGap: () => metrics.channelGaps.inc() },
      closeLog: new CloseLogThinning(),
      hub: this.hub,
      verify: opts.verify,
      logger,
      onHeartbeat: (c) => refreshOnHeartbeat(this.presence, c, logger),
      onFrames: (t, n) => metrics.wsFrames.inc({ t }, n),
      onBroadcastGap: () => metrics.broadcastGaps.inc(),
      onAck: (outcome) => metrics.countAck(outcome),
      onClosed: (c, code, by) => {
        this.#open.delete(c);
        metrics.wsConnections.dec();
        metrics.wsCloses.inc({ code: closeCodeLabel(code), by });
        // A failed removal is kept and retried (presence-removals.ts).
        this.presence.remove(c.user, c.id).catch((err: unknown) => logger.debug({ err, conn: c.id }, 'presence removal failed, will retry'));
      },
    };
  }

  /**
   * Starts the gateway: its subscriber connection, the node registration and the bus.
   * @throws PixiuError UNAVAILABLE when Redis cannot be reached
   */
  static async start(opts: GatewayOptions): Promise<Gateway> {
    const node = newNodeId();
    const subscriber = await createRedis({
      url: opts.redisUrl, commandTimeoutMs: opts.config.redisCommandTimeoutMs, name: `pixiu:bus:${node}`, logger: opts.logger,
    });
    let readerRedis: Redis;
    try {
      // Its own connection: a blocked XREAD must never hold up other Redis traffic.
      readerRedis = await createRedis({
        url: opts.redisUrl, commandTimeoutMs: opts.config.redisCommandTimeoutMs, name: `pixiu:broadcast:${node}`, logger: opts.logger, blocking: true,
      });
    } catch (err) {
      subscriber.disconnect();
      throw err;
    }
    // Their connection errors count as the command connection's do (src/service/redis-start.ts).
    opts.metrics.countConnectionErrors(subscriber, readerRedis);
    const gateway = new Gateway(opts, node, subscriber, readerRedis);
    try {
      await gateway.#membership.start({ config: opts.config, storeId: opts.storeId, leftBehind: opts.storeLeftBehind });
      await gateway.#bus.start();
      await gateway.#reader.start();
    } catch (err) {
      await gateway.#registry.stop();
      subscriber.disconnect();
      readerRedis.disconnect();
      throw err;
    }
    opts.logger.info({ node }, 'gateway started');
    return gateway;
  }

  /** Registers `@fastify/websocket` and the gateway routes; presence routes go behind the API token. */
  async register(app: FastifyInstance, producerScope: ProducerScope): Promise<void> {
    await producerScope((scope) => presenceRoutes(scope, this));
    await meRoutes(app, this);
    await app.register(async (ws) => {
      await ws.register(websocket, {
        // Pings are answered by the connection (frame-handler.ts `ping`), within its frame
        // limits. No `clients` set in `ws`: the gateway keeps its own (#open), and `ws`
        // tracked each socket with a close listener and a set entry of its own, ~190 bytes
        // of heap per idle connection (bench/README.md, 2026-12-05 memtrim).
        options: { maxPayload: this.config.maxClientFrameBytes, autoPong: false, clientTracking: false },
        // Shutdown closes sockets itself (1001, after flushing cursors): see close().
        preClose: (done) => done(),
      });
      answerUpgradeIds(ws);
      // After the plugin: its `upgrade` listener must run first (upgrade-guard.ts). The sockets the guard
      // counts are what PIXIU_MAX_CONNECTIONS bounds (connect-route.ts); all sockets, in socket-bound.ts.
      const upgrades = guardUpgrades(app, this.logger);
      connectRoute(ws, this, upgrades);
      boundSockets(app.server, { maxSockets: this.maxSockets, logger: this.logger, metrics: this.#metrics.sockets, upgradeSockets: () => upgrades.open });
    });
  }

  /**
   * The ingest hook (src/ingest/inbox-appends.ts `AppendedHook`): `user`'s inbox got `entry`
   * (`append` is the script's answer; its `nodes` hold the user's connections, from
   * presence). A local session is offered the entry with its record; other nodes get
   * a notify of its seq and MsgID and pull.
   */
  appended(user: string, append: AppendResult, entry: InboxEntry, record: StoredMessage): void {
    if (!this.config.notify) return;
    this.hub.offer(user, entry, append.epoch, record);
    for (const n of append.nodes) if (n !== this.node) this.#bus.notify(n, user, append.seq, entry.id);
  }

  /** Closes each connection of `user` a new one of its device replaced (4002), here or on the node holding it (kicks.ts). */
  kickReplaced(user: string, replaced: readonly ReplacedEntry[]): void {
    this.#kicks.replaced(user, replaced);
  }

  /** Closes a user's connections on every node (all, or one device's) (kicks.ts). @returns how many presence listed */
  kickUser(user: string, device: string | undefined, code: number, reason: string): Promise<number> {
    return this.#kicks.user(user, device, code, reason);
  }

  /** Now by Redis's clock (the node registry's, NodeRegistry.now), ms: what presence entries expire by. */
  redisNow(): number {
    return this.#registry.now();
  }

  /**
   * Now by Redis's clock counted on the monotonic clock from the last renewal
   * (NodeRegistry.redisClock), ms; undefined before the first: the floor of a new
   * message's expiry (src/store/record.ts), and the bound of the store's sweeps and
   * `client_msg_id` checks (src/store/sweep-clock.ts).
   */
  redisClock(): number | undefined {
    return this.#registry.redisClock();
  }

  /** The other nodes registered now (NodeRegistry.othersNow), for a stop's warning (leaving-others.ts). Never rejects. */
  otherNodes(): Promise<string[]> {
    return this.#registry.othersNow();
  }

  /** A handshake was accepted: its WebSocket opened (metrics). */
  onAccepted(): void {
    this.#metrics.countHandshake('accepted');
  }

  /** A handshake's client left before it took effect: dropped, unanswered (metrics). */
  onAbandoned(): void {
    this.#metrics.countHandshake('abandoned');
  }

  /** A WebSocket closed as it opened, before it became a connection (metrics). */
  onClosedAtOpen(code: number): void {
    this.#metrics.wsCloses.inc({ code: closeCodeLabel(code), by: 'server' });
  }

  /** A connection opened (metrics; the connections a Redis reconnect wakes). */
  onOpen(conn: WsConnection, _claims: ClientClaims): void {
    this.#open.add(conn);
    this.#metrics.wsConnections.inc();
  }

  /**
   * The first step of shutdown (DESIGN.md §6): refuse new connections (503) and close
   * every socket with 1001. Waits on nothing, Redis included. Idempotent.
   */
  stopAccepting(): void {
    this.state.accepting = false;
    this.hub.closeAll(CloseCode.goingAway, 'server shutting down');
  }

  /**
   * The rest of shutdown, after {@link stopAccepting} (done here too when it was not):
   * write every pending ack cursor, stop the broadcast reader, leave the bus and the
   * registry. These go to Redis together, so a Redis that does not answer costs one
   * command timeout, not one per step — except that leaving the registry first waits
   * for a renewal under way (its two commands: node-registry.ts `stop`), which the
   * service's shutdown bounds by its Redis steps' limit. Never rejects.
   */
  async close(): Promise<void> {
    this.stopAccepting();
    this.connection.clock.stop();
    this.presence.stop();
    const acks = this.hub.flushAll().then((unwritten) => {
      if (unwritten.length === 0) return;
      // Lost with this process: those devices get again what they acked since their
      // last written cursor, unless they resume with last_seq (docs/protocol.md, "ack").
      this.logger.error({ users: unwritten.length, sample: unwritten.slice(0, 10) },
        'ack cursors could not be written before shutdown (Redis unavailable); their devices will be sent those messages again');
    });
    await Promise.all([acks, this.#reader.stop(), this.#bus.stop(), this.#membership.stop()]);
    await this.#subscriber.quit().catch(() => this.#subscriber.disconnect());
  }

  /**
   * Brings every local connection's heartbeat forward to within a second
   * (ws-connection.ts heartbeatSoon): presence written back, inbox pulled. After a
   * reconnect of the main Redis connection or of the bus subscriber.
   */
  #heartbeatAllSoon(): void {
    for (const c of this.#open) c.heartbeatSoon(RECONNECT_HEARTBEAT_SPREAD_MS);
  }
}
