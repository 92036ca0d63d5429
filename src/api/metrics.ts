/**
 * Prometheus metrics (prom-client), one registry per service instance so several
 * instances in one process (tests) do not collide. Exposed at `GET /metrics`.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { CloseCode, closeCodeLabel } from '../delivery/close-codes.js';
import { ERRORS, type ErrorCode } from '../errors.js';
import {
  ACCEPTED, ACK_LABELS, FAILED, HANDSHAKE_OUTCOMES, HANDSHAKE_REFUSALS, INGEST_ROUTES, OUTCOME_LABELS, ROUTE_LABELS,
  SERVER_CLOSE_CODES, SERVER_FRAME_TYPES, WRITTEN, type AckLabel, type HandshakeOutcome, type IngestRoute,
} from './metric-labels.js';
import { DeliveryMetrics } from './delivery-metrics.js';
import { collectProcessMetrics } from './process-metrics.js';
import { StoreMetrics } from './store-metrics.js';
import { SocketMetrics } from './socket-metrics.js';
import { WsBufferMetrics } from './ws-buffer-metrics.js';

export type { AckLabel, IngestRoute } from './metric-labels.js';

/** The service's metrics. Names follow Prometheus conventions (`_total`, `_seconds`). */
export class Metrics {
  readonly registry = new Registry();

  /**
   * Messages ingested, by route and outcome: `created`, `duplicate`, `abandoned` (not
   * stored, not answered: its client had left, src/ingest/abandoned.ts; not on `channel`)
   * or an error code.
   */
  readonly ingestMessages = new Counter({
    name: 'pixiu_ingest_messages_total',
    help: 'Messages handed to Pixiu by producers, by route and outcome',
    labelNames: ['route', 'outcome'] as const,
    registers: [this.registry],
  });

  /**
   * Time from the route's handler starting to its answer, of the ingest requests that
   * stored what they were sent or found it stored (`created` or `duplicate`: 201 or 200),
   * and of every batch answered 200, whatever its items' outcomes. A refused request
   * (any error answer) is not timed: `pixiu_ingest_messages_total` counts it by its code.
   */
  readonly ingestDuration = new Histogram({
    name: 'pixiu_ingest_duration_seconds',
    help: 'Latency in seconds of ingest requests answered 200 or 201 (messages stored or found stored; batches answered), by route; refused ones are not timed',
    labelNames: ['route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });

  /** The message store's batches, failed writes and undecodable records (store-metrics.ts). */
  readonly store = new StoreMetrics(this.registry);

  /** Redis failures: connection errors of every connection of the node's (`connection`: the command one, the renewals one, the bus's, the broadcast reader's), and requests and batch items that failed on a Redis call (`request`; src/redis/client.ts `isRedisFailure`); not the node's background calls (delivery reads, ack-cursor writes, renewals), counted or logged where they fail. */
  readonly redisErrors = new Counter({
    name: 'pixiu_redis_errors_total',
    help: 'Redis failures: connection errors of the node\'s Redis connections (kind=connection: each failed connect or reconnect) and HTTP requests or batch items that failed on a Redis call (kind=request); not background calls',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  /**
   * Counts each connection error of `connections` (ioredis clients: their `error`
   * events) in {@link redisErrors} as `connection`: the node's command connection and
   * its renewals connection (`pixiu:renewals`; src/service/redis-start.ts), the bus's and
   * the broadcast reader's (src/gateway/gateway.ts).
   */
  countConnectionErrors(...connections: readonly { on(event: 'error', listener: () => void): unknown }[]): void {
    for (const connection of connections) connection.on('error', () => this.redisErrors.inc({ kind: 'connection' }));
  }

  /** HTTP answers by status class and error code. */
  readonly httpErrors = new Counter({
    name: 'pixiu_http_errors_total',
    help: 'HTTP requests answered with an error, by code',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });

  /**
   * Recipients of the messages in progress on this node, batches and single POSTs
   * (src/api/routes/ingest-budget.ts): a request that would take it past twice
   * `PIXIU_BATCH_MAX_RECIPIENTS` is 503. Named for batches, which it first counted alone.
   */
  readonly batchRecipientsInProgress = new Gauge({
    name: 'pixiu_batch_recipients_in_progress',
    help: 'Recipients of the messages (batches and single POSTs) being sent on this node',
    registers: [this.registry],
  });

  /**
   * Bytes of the request bodies of the messages in progress on this node, batches and
   * single POSTs (src/api/routes/ingest-budget.ts): a request that would take it past 64
   * times `PIXIU_MAX_BODY_BYTES` is 503.
   */
  readonly ingestBytesInProgress = new Gauge({
    name: 'pixiu_ingest_bytes_in_progress',
    help: 'Bytes of the request bodies of the messages (batches and single POSTs) being sent on this node',
    registers: [this.registry],
  });

  /**
   * Client tokens refused 503 because the keys to verify them cannot be had (the JWKS
   * unreachable or not a key set; src/auth/jwt.ts): `/readyz` does not look at the key source.
   */
  readonly tokenKeysUnavailable = new Counter({
    name: 'pixiu_token_keys_unavailable_total',
    help: 'Client tokens refused 503 because the keys to verify them (the JWKS) could not be fetched or read',
    registers: [this.registry],
  });

  /** Open WebSocket connections on this node. */
  readonly wsConnections = new Gauge({
    name: 'pixiu_ws_connections',
    help: 'Open WebSocket connections on this node',
    registers: [this.registry],
  });

  /**
   * The node's bound on its WebSocket connections, open or opening
   * (src/gateway/connection-bound.ts: `PIXIU_MAX_CONNECTIONS`, or its default derived
   * at start from the open-files limit), set once at start: past it handshakes are
   * refused 503 `full`. Compare {@link wsConnections} with it (walk28 F3: it was only
   * in the start's log line).
   */
  readonly wsConnectionsMax = new Gauge({
    name: 'pixiu_ws_connections_max',
    help: 'The most WebSocket connections this node holds at once, open or opening (PIXIU_MAX_CONNECTIONS, or its default derived at start); past it handshakes are refused 503',
    registers: [this.registry],
  });

  /** What the node's WebSockets hold unsent, and the pauses its budget caused (ws-buffer-metrics.ts). */
  readonly wsBuffers = new WsBufferMetrics(this.registry);

  /** The node's sockets, WebSockets and HTTP together: their bound, how many are open, those closed past it (socket-metrics.ts). */
  readonly sockets = new SocketMetrics(this.registry);

  /** Frames written to WebSocket clients, by frame type. */
  readonly wsFrames = new Counter({
    name: 'pixiu_ws_frames_sent_total',
    help: 'Frames sent to WebSocket clients, by type',
    labelNames: ['t'] as const,
    registers: [this.registry],
  });

  /** Inbox delivery: its reads, failed reads, stalled users, lag, and the gaps devices were told of (delivery-metrics.ts). */
  readonly delivery = new DeliveryMetrics(this.registry);

  /**
   * Live nodes in the node registry (this one included), as this node's last renewal of
   * its registration read it (src/cluster/node-registry.ts, every 5 s): no Redis read
   * per scrape. It stays at that value while renewals fail.
   */
  readonly clusterNodes = new Gauge({
    name: 'pixiu_cluster_nodes',
    help: 'Live nodes in the node registry (this one included) as this node\'s last registration renewal read it (every 5 s)',
    registers: [this.registry],
  });

  /**
   * This node's clock minus Redis's (`TIME`), seconds, as the registration renewal
   * measured it (every 5 s, src/cluster/clock-skew.ts): positive when this node's runs
   * ahead. Warned about in the log beyond 1 s; alert on it the same way. Holds its
   * last reading while renewals fail (or their `TIME` round trips are slow, over 2 s,
   * with the clock not out of step): how old that is, {@link clockOffsetAge}. Set through {@link setClockOffset}.
   */
  readonly clockOffset = new Gauge({
    name: 'pixiu_clock_offset_seconds',
    help: 'This node\'s clock minus Redis\'s clock (TIME), seconds, measured at each registration renewal (every 5 s); positive when this node runs ahead; its last reading while renewals fail (see pixiu_clock_offset_age_seconds)',
    registers: [this.registry],
  });

  /** `performance.now()` when {@link clockOffset} was last set, ms; undefined before. */
  #clockMeasuredAt: number | undefined;

  /**
   * How old {@link clockOffset}'s reading is, seconds, on a clock that never steps
   * (review-clock R6: the offset held its last value through an outage, an alert on it
   * quiet just when a node's clock may step). Up to about 5 s while renewals succeed;
   * NaN before the first reading.
   */
  readonly clockOffsetAge: Gauge = new Gauge({
    name: 'pixiu_clock_offset_age_seconds',
    help: 'Seconds since pixiu_clock_offset_seconds was last measured (monotonic clock): up to about 5 s while registration renewals succeed, growing while they fail or their TIME round trips are slow (over 2 s) with the clock not out of step; NaN before the first',
    registers: [this.registry],
    collect: (): void => this.clockOffsetAge.set(this.#clockMeasuredAt === undefined ? Number.NaN : (performance.now() - this.#clockMeasuredAt) / 1000),
  });

  /** Sets {@link clockOffset} (seconds, this node minus Redis) from a reading taken now. */
  setClockOffset(seconds: number): void {
    this.clockOffset.set(seconds);
    this.#clockMeasuredAt = performance.now();
  }

  /** What {@link presenceRemovalsPending} reads when scraped; set by the gateway. */
  #pendingRemovals: () => number = () => 0;

  /**
   * Presence entries of connections closed while Redis failed, and of handshakes whose
   * presence add was not answered (src/cluster/presence.ts `add`), still to remove
   * (src/cluster/presence-removals.ts): non-zero only during and just after an outage.
   */
  readonly presenceRemovalsPending: Gauge = new Gauge({
    name: 'pixiu_presence_removals_pending',
    help: 'Presence entries of closed connections, or of handshakes whose presence add was not answered, whose removal failed (Redis unavailable) and waits for a retry',
    registers: [this.registry],
    collect: (): void => this.presenceRemovalsPending.set(this.#pendingRemovals()),
  });

  /** Makes {@link presenceRemovalsPending} read `count` (how many removals are pending) when scraped. */
  readPresenceRemovals(count: () => number): void {
    this.#pendingRemovals = count;
  }

  /**
   * Times this node's broadcast reader found broadcasts trimmed from the stream before
   * it read them (src/broadcast/reader.ts): its connections were sent a `gap`. Non-zero
   * means the fan-out's rate (`PIXIU_BROADCAST_RATE`) cannot keep up with bursts of
   * broadcasts past the stream's cap (`PIXIU_BROADCAST_STREAM_CAP`).
   */
  readonly broadcastLosses = new Counter({
    name: 'pixiu_broadcast_reader_losses_total',
    help: 'Times the broadcast reader found broadcasts trimmed before it read them (connections were sent a gap)',
    registers: [this.registry],
  });

  /**
   * Broadcast-stream `gap` frames written to connections (src/broadcast/subscription.ts
   * `sendGap`), one per connection told: a `last_bseq` older than the stream retains,
   * the stream trimmed during a catch-up, a catch-up read that failed or whose queue of
   * live broadcasts overflowed, or the node's reader losing broadcasts
   * ({@link broadcastLosses}: one gap per connection it had).
   * A broadcast gap names no count of broadcasts (a bseq is a stream ID): frames only.
   */
  readonly broadcastGaps = new Counter({
    name: 'pixiu_broadcast_gaps_total',
    help: 'Broadcast-stream gap frames written to WebSocket connections (broadcasts they can no longer get)',
    registers: [this.registry],
  });

  /**
   * Channel `gap` frames sent to connections (src/channels/connection-channels.ts
   * `#sendGap`), one per connection and channel told: a `since` older than the history,
   * trimming during a catch-up, a full catch-up queue, or the node's refill finding
   * publications trimmed. No channel label: labels never take user input.
   */
  readonly channelGaps = new Counter({ name: 'pixiu_channel_gaps_total', help: 'Channel gap frames sent to WebSocket connections (publications they can no longer get)', registers: [this.registry] });

  /** Connections closed because a history answer on them went untaken past `PIXIU_HISTORY_TAKE_TIMEOUT` (history-budget.ts). */
  readonly historyConnectionsClosed = new Counter({
    name: 'pixiu_history_connections_closed_total',
    help: 'HTTP connections closed because a history page on them was not taken by its client within PIXIU_HISTORY_TAKE_TIMEOUT',
    registers: [this.registry],
  });

  /** HTTP connections closed for pipelining past a bound, by which (pipelining-bound.ts `PipelineRefusal`). */
  readonly pipelineConnectionsClosed = new Counter({
    name: 'pixiu_http_pipelining_closes_total',
    help: 'HTTP connections closed for a pipelined request past a bound: pipelined_requests (64 in progress), unread_bytes (16 MiB of answers unread)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  /**
   * WebSocket connections closed, by close code and by who chose it: `by="server"` for a
   * close the server decided (a client can close with 4009 too: alert on the server's).
   */
  readonly wsCloses = new Counter({
    name: 'pixiu_ws_closes_total',
    help: 'WebSocket connections closed, by close code and by who closed them (server: the server decided the code; client: the client\'s code, or 1006 for a lost connection)',
    labelNames: ['code', 'by'] as const,
    registers: [this.registry],
  });

  /**
   * Client `ack` frames received, by what they did (src/delivery/effects.ts `AckOutcome`):
   * `moved` the connection's ack position (written to the device's stored cursor, which
   * never moves back: one already past it stays), `refused` (answered with an `error`
   * frame), `idle` (moved nothing: a repeat, another epoch's, or before delivery started).
   */
  readonly acks = new Counter({
    name: 'pixiu_acks_total',
    help: 'Ack frames received from WebSocket clients, by outcome (moved: the connection\'s ack position moved, and is written to the device\'s stored cursor, which never moves back; refused: answered with an error frame; idle: moved nothing)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  /**
   * Device ack cursors written to Redis (coalesced: at most one per device every
   * `PIXIU_ACK_FLUSH_INTERVAL`), by result; a `failed` one is kept and written again
   * (src/delivery/ack-cursors.ts).
   */
  readonly ackCursorWrites = new Counter({
    name: 'pixiu_ack_cursor_writes_total',
    help: 'Device ack cursors written to Redis, by result (failed ones are kept and retried)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  /**
   * WebSocket handshakes on `GET /v1/connect`, by outcome: `accepted` (the WebSocket
   * opened: 101), `abandoned` (its client had left before it took effect: no answer,
   * the device's connection untouched), `busy` (refused 503 for the node's bound of
   * handshakes in progress, `PIXIU_MAX_HANDSHAKES`: src/gateway/handshake-slots.ts),
   * `full` (refused 503 for the node's bound on its connections, `PIXIU_MAX_CONNECTIONS`:
   * src/gateway/connection-bound.ts), or the error code it was refused with (before the
   * upgrade). The four that are not a code: `HANDSHAKE_OUTCOMES` (metric-labels.ts).
   */
  readonly wsHandshakes = new Counter({
    name: 'pixiu_ws_handshakes_total',
    help: 'WebSocket handshakes, by outcome: accepted (101, the WebSocket opened), abandoned (its client left before it took effect), busy (503: PIXIU_MAX_HANDSHAKES in progress), full (503: PIXIU_MAX_CONNECTIONS held) or the error code of the refusal',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  constructor() {
    // prom-client's defaults, those whose cost grows with open sockets sampled (process-metrics.ts).
    collectProcessMetrics(this.registry, 'pixiu_');
    this.#zeroSeries();
  }

  /** Counts one client `ack` frame by what it did. */
  countAck(outcome: AckLabel): void {
    this.acks.inc(ACK_LABELS[outcome]);
  }

  /** Counts device ack cursors written to Redis: `written` succeeded, `failed` did not. */
  countAckWrites(written: number, failed: number): void {
    if (written > 0) this.ackCursorWrites.inc(WRITTEN, written);
    if (failed > 0) this.ackCursorWrites.inc(FAILED, failed);
  }

  /**
   * Counts one WebSocket handshake.
   * @param outcome one of `HANDSHAKE_OUTCOMES` (metric-labels.ts), or the error code it was refused with
   */
  countHandshake(outcome: HandshakeOutcome | ErrorCode): void {
    this.wsHandshakes.inc(outcome === 'accepted' ? ACCEPTED : { outcome });
  }

  /**
   * Starts the labelled counters' series of a small, fixed label set at 0 (docs/api.md,
   * "GET /metrics"). prom-client shows a series only from its first event: until then
   * an alert on it reads "no data", not 0, and `rate()` / `increase()` miss that first
   * event, as Prometheus counts from a series' first sample (an ops newcomer's finding).
   * Label values outside these sets (an ingest refusal's code, a close code a client
   * chose) still appear at their first event.
   */
  #zeroSeries(): void {
    for (const route of INGEST_ROUTES) {
      for (const outcome of ['created', 'duplicate'] as const) this.ingestMessages.inc(OUTCOME_LABELS[route][outcome], 0);
      // Not an error code: a message not stored because its client left (src/ingest/abandoned.ts);
      // a channel publication stores nothing, and is never abandoned.
      if (route !== 'channel') this.ingestMessages.inc({ route, outcome: 'abandoned' }, 0);
      this.ingestDuration.zero(ROUTE_LABELS[route]);
    }
    for (const labels of Object.values(ACK_LABELS)) this.acks.inc(labels, 0);
    for (const labels of [WRITTEN, FAILED]) this.ackCursorWrites.inc(labels, 0);
    for (const outcome of [...HANDSHAKE_OUTCOMES, ...HANDSHAKE_REFUSALS]) this.wsHandshakes.inc({ outcome }, 0);
    for (const kind of ['connection', 'request']) this.redisErrors.inc({ kind }, 0);
    for (const reason of ['pipelined_requests', 'unread_bytes']) this.pipelineConnectionsClosed.inc({ reason }, 0);
    for (const code of Object.keys(ERRORS)) this.httpErrors.inc({ code }, 0);
    for (const t of SERVER_FRAME_TYPES) this.wsFrames.inc({ t }, 0);
    for (const code of SERVER_CLOSE_CODES) this.wsCloses.inc({ code: closeCodeLabel(code), by: 'server' }, 0);
    for (const code of [CloseCode.normal, CloseCode.goingAway, CloseCode.abnormal]) this.wsCloses.inc({ code: closeCodeLabel(code), by: 'client' }, 0);
  }

  /**
   * Counts ingested messages of one route by outcome.
   * @param outcome `created`, `duplicate` or an error code
   * @param count how many messages had it
   */
  countIngest(route: IngestRoute, outcome: string, count = 1): void {
    const labels = outcome === 'created' || outcome === 'duplicate' ? OUTCOME_LABELS[route][outcome] : { route, outcome };
    this.ingestMessages.inc(labels, count);
  }

  /**
   * Counts one message, broadcast or channel publication stored now (`created`, answered
   * 201) or found stored (`duplicate`, 200), and records its request's latency: what
   * those routes do on success. Timed when stored or found stored only (docs/api.md,
   * "GET /metrics"): a refused request is counted by the error handler (src/api/refusal-counts.ts),
   * and a batch counts its items itself.
   * @param startedMs when its handler began, from `performance.now()`
   */
  ingested(route: Exclude<IngestRoute, 'batch'>, duplicate: boolean, startedMs: number): void {
    this.countIngest(route, duplicate ? 'duplicate' : 'created');
    this.observeIngest(route, startedMs);
  }

  /**
   * Records the latency of one ingest request answered 200 or 201 (not a refused one:
   * see {@link ingestDuration}).
   * @param startedMs when its handler began, from `performance.now()`
   */
  observeIngest(route: IngestRoute, startedMs: number): void {
    this.ingestDuration.observe(ROUTE_LABELS[route], (performance.now() - startedMs) / 1000);
  }
}
