/**
 * The table of every setting: its key, environment variable, CLI flag, default and
 * what it accepts. DESIGN.md §10 is the contract for the names and defaults; this
 * table is its single implementation (the CLI builds its flags from it, the docs
 * list it with `pixiu serve --help`).
 */
import { redisUrlProblem } from '../redis/url.js';
import { apiTokenProblem } from '../auth/api-token.js';
import { publicKeyProblem, unescapePem } from '../auth/pem-key.js';
import { trustProxyEntryProblem } from './trust-proxy.js';
import { jwksUrlProblem } from '../auth/jwks-fetch.js';

/**
 * What is wrong with an `aud` / `iss` setting that begins or ends with whitespace: a
 * token would have to carry the space too, so every client got 401 with nothing in
 * the log (an env file's trailing space; a fresh tester's finding). jose compares
 * both exactly (RFC 7519 §4.1.1, §4.1.3: StringOrURI, case-sensitive).
 * @returns the problem, or undefined when the value has no space at either end
 */
function edgeSpaceProblem(value: string): string | undefined {
  return value.trim() === value ? undefined
    : 'it begins or ends with whitespace, which a token\'s claim would have to carry too (compared exactly)';
}

/**
 * What is wrong with a `PIXIU_JWT_SECRET` of only whitespace, or one beginning or ending
 * with whitespace (walk38 F3). The key is the value's exact UTF-8 bytes (DESIGN.md §10):
 * a blank one is a key anyone can guess, and an edge newline (`echo > secrets.env`, a
 * Kubernetes secret made from a file) made every token a backend signed with the
 * trimmed text 401, looking like a key mismatch. The data dir's `jwt-secret` is read
 * trimmed, so it never meets this.
 * @returns the problem, never quoting the value; undefined when good
 */
function jwtSecretProblem(value: string): string | undefined {
  if (value.trim() === '') return 'it is only whitespace, a key anyone could guess';
  return value.trim() === value ? undefined
    : 'it begins or ends with whitespace (a newline from a file, say); the key is its exact bytes, so tokens signed with the trimmed text would be refused: remove it';
}

/** How a setting's text (from the environment or a flag) is read. */
export type SettingKind =
  | 'string'
  | 'int'
  /** a duration: whole milliseconds, or a string the `ms` package reads ("10s", "7d") */
  | 'duration'
  /** a comma-separated list of durations, in ms */
  | 'durations'
  /** a comma-separated list of strings, each trimmed; an empty entry (`a,,b`, a trailing comma, `,` alone) is skipped */
  | 'list'
  /** one of `choices` */
  | 'enum';

/** One row of the table. */
export interface SettingSpec {
  /** Environment variable (DESIGN.md §10). */
  readonly env: string;
  /** CLI flag of `pixiu serve`, without the dashes. */
  readonly flag: string;
  readonly kind: SettingKind;
  /** The default value, already parsed; `undefined` means unset. */
  readonly default: unknown;
  /** What the setting means and what it accepts, shown in errors and `--help`. */
  readonly doc: string;
  /** Words `--help` adds after the default, where it alone would mislead (`storage`: relative to what?). */
  readonly defaultNote?: string;
  /** Inclusive bounds for numbers (ms for durations, bytes for sizes). */
  readonly min?: number;
  readonly max?: number;
  /** Allowed values for `enum`. */
  readonly choices?: readonly string[];
  /** Extra JSON-schema keywords for the parsed value (e.g. a `pattern`). */
  readonly schema?: Readonly<Record<string, unknown>>;
  /**
   * The value is a credential or may hold one (a password in a URL, a private key
   * given for a public one): an error about it names the setting and what is wrong
   * (its length against the bound, or that its form is wrong), never the value, so
   * that a near-miss secret does not land in a terminal or a log.
   */
  readonly secret?: boolean;
  /**
   * A check of a string value (of each entry of a `list`) beyond its schema: what is
   * wrong with it, in words that never quote it unless the setting is not secret;
   * undefined when it is good.
   */
  readonly check?: (value: string) => string | undefined;
  /**
   * Rewrites a string value before it is validated and kept (the PEM key's literal
   * `\n` sequences become newlines).
   */
  readonly normalize?: (text: string) => string;
}

const KiB = 1024;
const MiB = 1024 * KiB;
const SECOND = 1000;
const DAY = 86_400 * SECOND;

/** Every setting, keyed by its name in the {@link Config} object. */
export const SETTINGS = {
  host: { env: 'PIXIU_HOST', flag: 'host', kind: 'string', default: '127.0.0.1', doc: 'listen address (an IP or host name)', schema: { minLength: 1 } },
  port: { env: 'PIXIU_PORT', flag: 'port', kind: 'int', default: 8080, min: 0, max: 65535, doc: 'HTTP and WebSocket port, 0 to 65535 (0: any free port)' },
  listenBacklog: { env: 'PIXIU_LISTEN_BACKLOG', flag: 'listen-backlog', kind: 'int', default: 4096, min: 1, max: 65535, doc: 'connections the kernel queues for the node before it accepts them (the listen backlog), 1 to 65535; the kernel lowers it to its own limit (Linux: net.core.somaxconn, 4096 since 5.4): a reconnect herd arriving while the event loop is busy waits here instead of having its SYNs dropped (a 1 s and longer retry each)' },
  dataDir: { env: 'PIXIU_DATA_DIR', flag: 'data-dir', kind: 'string', default: 'storage', defaultNote: 'relative to the current directory', doc: 'data root: store partitions, generated secrets, the local Redis (a path)', schema: { minLength: 1 } },
  advertiseUrl: { env: 'PIXIU_ADVERTISE_URL', flag: 'advertise-url', kind: 'string', default: undefined, doc: 'base URL other nodes reach this node at, to read the messages its store holds (http:// or https://); unset: http://<host>:<port>, with 0.0.0.0 and :: read as 127.0.0.1 (one machine only)', schema: { pattern: '^https?://[^\\s/?#]+(/[^\\s?#]*)?$' } },
  redisUrl: { env: 'PIXIU_REDIS_URL', flag: 'redis-url', kind: 'string', default: undefined, doc: 'Redis to use, redis://, rediss:// or unix:// URL; unset: start a local redis-server under the data dir', schema: { pattern: '^(redis|rediss|unix)://' }, secret: true, check: redisUrlProblem },
  redisPrefix: { env: 'PIXIU_REDIS_PREFIX', flag: 'redis-prefix', kind: 'string', default: 'px:', doc: 'prefix of every Redis key (1-32 chars, no braces or whitespace)', schema: { pattern: '^[^{}\\s]{1,32}$' } },
  redisCommandTimeoutMs: { env: 'PIXIU_REDIS_COMMAND_TIMEOUT', flag: 'redis-command-timeout', kind: 'duration', default: 2 * SECOND, min: 10, max: 60 * SECOND, doc: 'how long one Redis command may take before it fails as UNAVAILABLE, 10ms to 60s; also bounds each read of stored messages from another node unless PIXIU_PEER_READ_TIMEOUT is set' },
  peerReadTimeoutMs: { env: 'PIXIU_PEER_READ_TIMEOUT', flag: 'peer-read-timeout', kind: 'duration', default: undefined, min: 10, max: 60 * SECOND, doc: 'how long one read of stored messages from another node may take (POST /internal/v1/records: delivery, history and GET by id of messages another node stores), 10ms to 60s; past it the read fails as UNAVAILABLE (delivery retries it); unset: PIXIU_REDIS_COMMAND_TIMEOUT' },
  partitions: { env: 'PIXIU_PARTITIONS', flag: 'partitions', kind: 'int', default: 8, min: 1, max: 256, doc: 'store partitions, a power of two from 1 to 256', schema: { enum: [1, 2, 4, 8, 16, 32, 64, 128, 256] } },
  storeDurability: { env: 'PIXIU_STORE_DURABILITY', flag: 'store-durability', kind: 'enum', default: 'fsync', choices: ['fsync', 'relaxed'], doc: 'fsync: a put resolves after fsync; relaxed: after the OS write (a machine crash may lose the last writes)' },
  storeCacheBytes: { env: 'PIXIU_STORE_CACHE_BYTES', flag: 'store-cache-bytes', kind: 'int', default: 64 * MiB, min: 0, max: 16 * 1024 * MiB, doc: 'memory the store read cache may use, bytes: each record counts its stored JSON and 320 B of bookkeeping (0 turns it off)' },
  storeWriteTimeoutMs: { env: 'PIXIU_STORE_WRITE_TIMEOUT', flag: 'store-write-timeout', kind: 'duration', default: 10 * SECOND, min: 100, max: 600 * SECOND, doc: 'how long one store partition write (its fsync included, and its wait for a write slot) may be in flight, 100ms to 10m; past it the partition takes no messages until that write ends (a stalled disk): the messages waiting for it and new ones are refused 503, and /readyz is 503 naming it' },
  messageTtlMs: { env: 'PIXIU_MESSAGE_TTL', flag: 'message-ttl', kind: 'duration', default: 7 * DAY, min: SECOND, max: 30 * DAY, doc: 'default message retention, 1s to 30d' },
  sweepIntervalMs: { env: 'PIXIU_SWEEP_INTERVAL', flag: 'sweep-interval', kind: 'duration', default: 30 * SECOND, min: 10, max: DAY, doc: 'how often each partition deletes expired messages' },
  maxMessageBytes: { env: 'PIXIU_MAX_MESSAGE_BYTES', flag: 'max-message-bytes', kind: 'int', default: 64 * KiB, min: KiB, max: 16 * MiB, doc: 'largest encoded message in UTF-8 bytes of its JSON {type, from, data}' },
  drainDelayMs: { env: 'PIXIU_DRAIN_DELAY', flag: 'drain-delay', kind: 'duration', default: 0, min: 0, max: 600 * SECOND, doc: 'on SIGTERM, how long /readyz answers 503 (this node is shutting down) while everything else is served as before (HTTP answers then end their connection), so that a load balancer takes the node out before it stops accepting; then the shutdown runs; 0s to 10m, 0: none. SIGINT and SIGHUP stop without it; a second signal ends it' },
  requestTimeoutMs: { env: 'PIXIU_REQUEST_TIMEOUT', flag: 'request-timeout', kind: 'duration', default: 60 * SECOND, min: 100, max: 600 * SECOND, doc: 'time an HTTP request (line, headers and body) may take to arrive, 100ms to 600s; over it: 408 and the connection is closed (checked every quarter of it or of PIXIU_HEADERS_TIMEOUT, whichever is smaller, at most every 30s)' },
  headersTimeoutMs: { env: 'PIXIU_HEADERS_TIMEOUT', flag: 'headers-timeout', kind: 'duration', default: 10 * SECOND, min: 100, max: 600 * SECOND, doc: 'time a request\'s line and headers may take to arrive, 100ms to 600s, counted from the opening of a new connection for its first request (a connection that sends nothing is closed after it), from its first byte for a later request on a keep-alive connection; the smaller of it and PIXIU_REQUEST_TIMEOUT applies; over it: 408 and the connection is closed (checked every quarter of it); an idle keep-alive connection between requests is kept 72s, as before' },
  historyTakeTimeoutMs: { env: 'PIXIU_HISTORY_TAKE_TIMEOUT', flag: 'history-take-timeout', kind: 'duration', default: 60 * SECOND, min: 100, max: 3600 * SECOND, doc: 'time a history page may take to be read by its client once it can start reading it, 100ms to 1h (60s: a full page of about 1 MiB at 20 KiB/s); over it the connection is closed' },
  maxBodyBytes: { env: 'PIXIU_MAX_BODY_BYTES', flag: 'max-body-bytes', kind: 'int', default: MiB, min: KiB, max: 256 * MiB, doc: 'largest HTTP request body in bytes (a batch counts as one body), 1024 to 268435456 (256 MiB); a body is parsed on the event loop, holding every connection of the node: a 1 MiB body of the costliest shape about 0.1 s, 8 MiB about 1 s (docs/api.md); the messages in progress on a node hold at most 64 times this in bodies at once, 503 past it' },
  batchMaxRecipients: { env: 'PIXIU_BATCH_MAX_RECIPIENTS', flag: 'batch-max-recipients', kind: 'int', default: 100_000, min: 1, max: 1_000_000, doc: 'most recipients one POST /v1/messages/batch may reach in all (each item\'s distinct recipients, room members counted); items from the one past it are refused with 400; a node works on messages (batches and single POSTs, each counted up to this) reaching at most twice this at once, 503 past it' },
  maxDeviceCursors: { env: 'PIXIU_MAX_DEVICE_CURSORS', flag: 'max-device-cursors', kind: 'int', default: 100, min: 1, max: 100_000, doc: 'devices whose ack cursor is kept per user; past it the cursors furthest behind are dropped (such a device resumes as a new one unless it gives last_seq)' },
  inboxCap: { env: 'PIXIU_INBOX_CAP', flag: 'inbox-cap', kind: 'int', default: 10_000, min: 1, max: 10_000_000, doc: 'entries kept per user inbox; older ones are trimmed (clients see a gap)' },
  apiToken: { env: 'PIXIU_API_TOKEN', flag: 'api-token', kind: 'string', default: undefined, doc: 'producer/admin bearer token, 16 to 512 visible ASCII characters (! to ~, no whitespace); unset: generated on first start and kept in the data dir', schema: { minLength: 16, maxLength: 512 }, secret: true, check: apiTokenProblem },
  jwtSecret: { env: 'PIXIU_JWT_SECRET', flag: 'jwt-secret', kind: 'string', default: undefined, doc: 'HS256 secret for client JWTs (its UTF-8 bytes), at least 32 chars, no whitespace at either end', schema: { minLength: 32 }, secret: true, check: jwtSecretProblem },
  jwtPublicKey: { env: 'PIXIU_JWT_PUBLIC_KEY', flag: 'jwt-public-key', kind: 'string', default: undefined, doc: 'PEM public key (SPKI, -----BEGIN PUBLIC KEY-----) verifying client JWTs; the two characters \\n stand for a newline (as in env files); RSA (2048 bits or more): RS256/384/512 or PS256/384/512, EC: ES256 (P-256), ES384 (P-384) or ES512 (P-521), Ed25519: EdDSA or Ed25519', schema: { pattern: '-----BEGIN PUBLIC KEY-----' }, secret: true, normalize: unescapePem, check: publicKeyProblem },
  jwksUrl: { env: 'PIXIU_JWKS_URL', flag: 'jwks-url', kind: 'string', default: undefined, doc: 'JWKS URL (https://; http:// to another host is warned about at start) with the keys verifying client JWTs', schema: { pattern: '^https?://' }, secret: true, check: jwksUrlProblem },
  jwtAudience: { env: 'PIXIU_JWT_AUDIENCE', flag: 'jwt-audience', kind: 'string', default: undefined, doc: 'when set, a client JWT must carry this aud (a string equal to it, or an array holding it; no whitespace at either end); unset: aud is not checked (warned about at start with a public key or JWKS, whose provider signs other applications\' tokens too)', schema: { minLength: 1 }, check: edgeSpaceProblem },
  jwtIssuer: { env: 'PIXIU_JWT_ISSUER', flag: 'jwt-issuer', kind: 'string', default: undefined, doc: 'when set, a client JWT must carry this iss (compared exactly; no whitespace at either end); unset: iss is not checked', schema: { minLength: 1 }, check: edgeSpaceProblem },
  allowedOrigins: { env: 'PIXIU_ALLOWED_ORIGINS', flag: 'allowed-origins', kind: 'list', default: [], doc: 'comma-separated browser origins allowed on /v1/connect (scheme, host and port), * for any; empty entries are skipped; empty: only an origin whose host and port are the request\'s Host, of any scheme (behind a proxy terminating TLS the node sees http, the page https)' },
  trustProxy: { env: 'PIXIU_TRUST_PROXY', flag: 'trust-proxy', kind: 'list', default: [], doc: 'comma-separated addresses or CIDR ranges of the reverse proxies whose X-Forwarded-For names the client (fastify\'s trustProxy; also loopback, linklocal, uniquelocal), for the ip field of the node\'s lines about refused requests and handshakes; empty entries are skipped; empty: trust no proxy, the ip is the TCP peer\'s. No true, hop count or /0: each lets any client choose its logged address. The pixiu listening line names the list read', check: trustProxyEntryProblem },
  maxClientFrameBytes: { env: 'PIXIU_MAX_CLIENT_FRAME_BYTES', flag: 'max-client-frame-bytes', kind: 'int', default: 4 * KiB, min: 256, max: MiB, doc: 'largest WebSocket frame a client may send, bytes' },
  maxConnectionsPerUser: { env: 'PIXIU_MAX_CONNECTIONS_PER_USER', flag: 'max-connections-per-user', kind: 'int', default: 5, min: 1, max: 1000, doc: 'open connections allowed per user, across nodes, 1 to 1000' },
  connectBurst: { env: 'PIXIU_CONNECT_BURST', flag: 'connect-burst', kind: 'int', default: 30, min: 1, max: 100_000, doc: 'WebSocket handshakes one user may open on this node at once, 1 to 100000, before PIXIU_CONNECT_RATE holds them (a token bucket per user; over it: 429 with Retry-After)' },
  maxConnections: { env: 'PIXIU_MAX_CONNECTIONS', flag: 'max-connections', kind: 'int', default: undefined, min: 1, max: 10_000_000, doc: 'WebSocket connections this node holds at once, open or opening, all users together, 1 to 10000000 (over it: 503 with Retry-After, before the token is read); unset: the open-files limit less 1024 and what the store may need (at least half the limit), or 10000 when the limit is unknown; the start logs it' },
  maxHandshakes: { env: 'PIXIU_MAX_HANDSHAKES', flag: 'max-handshakes', kind: 'int', default: 100, min: 1, max: 100_000, doc: 'WebSocket handshakes this node works on at once, all users together, 1 to 100000, each from its request until its welcome is sent (over it: 503 with Retry-After)' },
  connectRatePerMinute: { env: 'PIXIU_CONNECT_RATE', flag: 'connect-rate', kind: 'int', default: 60, min: 1, max: 6_000_000, doc: 'WebSocket handshakes per minute one user may open on this node, sustained after the PIXIU_CONNECT_BURST, 1 to 6000000' },
  deliveryWindow: { env: 'PIXIU_DELIVERY_WINDOW', flag: 'delivery-window', kind: 'int', default: 100, min: 1, max: 10_000, doc: 'unacked messages in flight per connection' },
  ackTimeoutMs: { env: 'PIXIU_ACK_TIMEOUT', flag: 'ack-timeout', kind: 'duration', default: 10 * SECOND, min: 10, max: 600 * SECOND, doc: 'time without an ack before the first redelivery' },
  redeliveryBackoffMs: { env: 'PIXIU_REDELIVERY_BACKOFF', flag: 'redelivery-backoff', kind: 'durations', default: [2 * SECOND, 4 * SECOND, 6 * SECOND], min: 10, max: 600 * SECOND, doc: 'comma-separated waits between redelivery rounds; after the last, close 4008' },
  claimsSettleMs: { env: 'PIXIU_CLAIMS_SETTLE', flag: 'claims-settle', kind: 'duration', default: 6000, min: 0, max: 60 * SECOND, doc: 'on a shared Redis (PIXIU_REDIS_URL), how old the partition claims must be before a node starts while other nodes run or Redis has just started (a new data dir before it claims a block, one with a block before it checks that no running node serves its store): after Redis lost its data, running nodes write their claims and leases back within 5 s; 0 turns the wait off (one node per Redis)' },
  ackFlushIntervalMs: { env: 'PIXIU_ACK_FLUSH_INTERVAL', flag: 'ack-flush-interval', kind: 'duration', default: 100, min: 10, max: 3600 * SECOND, doc: 'how often acked cursors are written to Redis, coalesced per user (a user\'s last logout and shutdown write at once)' },
  heartbeatMs: { env: 'PIXIU_HEARTBEAT', flag: 'heartbeat', kind: 'duration', default: 25 * SECOND, min: 10, max: 600 * SECOND, doc: 'server ping interval, below --idle-timeout / PIXIU_IDLE_TIMEOUT; each also pulls the inbox' },
  idleTimeoutMs: { env: 'PIXIU_IDLE_TIMEOUT', flag: 'idle-timeout', kind: 'duration', default: 60 * SECOND, min: 20, max: 3600 * SECOND, doc: 'a connection silent this long is closed' },
  socketHighWaterBytes: { env: 'PIXIU_SOCKET_HIGH_WATER_BYTES', flag: 'socket-high-water-bytes', kind: 'int', default: MiB, min: KiB, max: 1024 * MiB, doc: 'socket buffer above which a connection is paused, bytes' },
  socketHardCapBytes: { env: 'PIXIU_SOCKET_HARD_CAP_BYTES', flag: 'socket-hard-cap-bytes', kind: 'int', default: 8 * MiB, min: KiB, max: 4096 * MiB, doc: 'socket buffer above which a connection is closed 4009, bytes' },
  pausedTimeoutMs: { env: 'PIXIU_PAUSED_TIMEOUT', flag: 'paused-timeout', kind: 'duration', default: 30 * SECOND, min: 10, max: 3600 * SECOND, doc: 'a connection paused by backpressure whose client reads nothing of its queue this long is closed 4009' },
  socketBufferBudgetBytes: { env: 'PIXIU_SOCKET_BUFFER_BUDGET_BYTES', flag: 'socket-buffer-budget-bytes', kind: 'int', default: undefined, min: 0, max: 1024 * 1024 * MiB, doc: 'bytes all of this node\'s WebSockets may hold written and not yet taken by the kernel, together; at or over it a connection holding more than 64 KiB is paused as one past its high-water mark (src/gateway/buffer-budget.ts); 0: no such bound; unset: a quarter of the memory the process may use (the machine\'s, or its cgroup limit), at most 2 GiB; the start logs it' },
  notify: { env: 'PIXIU_NOTIFY', flag: 'notify', kind: 'enum', default: 'on', choices: ['on', 'off'], doc: 'on: an append wakes delivery at once (in-process or Pub/Sub); off: delivery relies on heartbeat pulls only (for testing that path)' },
  broadcastStreamCap: { env: 'PIXIU_BROADCAST_STREAM_CAP', flag: 'broadcast-stream-cap', kind: 'int', default: 10_000, min: 1, max: 10_000_000, doc: 'broadcasts retained for catch-up' },
  broadcastRate: { env: 'PIXIU_BROADCAST_RATE', flag: 'broadcast-rate', kind: 'int', default: 50_000, min: 100, max: 10_000_000, doc: 'broadcast frames per second one node may send (a token bucket, so live inbox delivery keeps flowing beside a broadcast; a 2-core node sends ~100k/s at most)' },
  channelHistory: { env: 'PIXIU_CHANNEL_HISTORY', flag: 'channel-history', kind: 'int', default: 100, min: 1, max: 100_000, doc: 'publications kept per channel for sub with since' },
  channelHistoryTtlMs: { env: 'PIXIU_CHANNEL_HISTORY_TTL', flag: 'channel-history-ttl', kind: 'duration', default: DAY, min: SECOND, max: 30 * DAY, doc: 'a channel\'s history is dropped this long after its last publication, 1s to 30d' },
  roomSizeCap: { env: 'PIXIU_ROOM_SIZE_CAP', flag: 'room-size-cap', kind: 'int', default: 10_000, min: 1, max: 1_000_000, doc: 'most members a room may have' },
  logLevel: { env: 'PIXIU_LOG_LEVEL', flag: 'log-level', kind: 'enum', default: 'info', choices: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], doc: 'pino log level' },
} as const satisfies Record<string, SettingSpec>;

/** A setting's name. */
export type SettingKey = keyof typeof SETTINGS;
