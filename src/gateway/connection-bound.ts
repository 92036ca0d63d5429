/**
 * How many WebSocket connections a node holds at most (`PIXIU_MAX_CONNECTIONS`;
 * docs/protocol.md, "Connecting"; docs/decisions.md, "A node's bound on its
 * connections"). Each connection holds a file descriptor, and past the process's limit
 * the kernel and Node reset new connections without a word, producers' HTTP connections
 * and `/healthz` among them (walk13 §4: under `ulimit -n 256`, 189 devices connected and
 * every new producer connection was reset). Unset, the bound is derived at start from
 * the process's open-files limit (its soft limit, which Node raised to the hard one as
 * it started), less what the node's other files may need ({@link defaultMaxConnections}),
 * so that the node refuses a device itself, with a status and a count, before the
 * kernel would refuse anyone.
 *
 * What is counted is what holds a file descriptor: the socket of every upgrade request,
 * whatever its path (upgrade-guard.ts counts them), from its request until the socket
 * closes — a handshake in progress, an open WebSocket, a refused handshake until its
 * answer is out and its socket closed, and likewise an upgrade request to another path
 * (`Upgrade: h2c`). A plain request (no `Connection: Upgrade`) is an HTTP connection like
 * a producer's and is not counted; an upgrade socket carries one request only, so none
 * is counted twice. Past the bound a handshake on `GET /v1/connect` is refused 503
 * `UNAVAILABLE` with `Retry-After` as soon as its request arrives, before its token is
 * read and before it takes a handshake slot (handshake-slots.ts), and counted in
 * `pixiu_ws_handshakes_total{outcome="full"}` (handshake-refusals.ts). A node refuses,
 * rather than queues: a client's back-off (docs/protocol.md, Close codes) waits for it,
 * and a load balancer may send it to another node.
 *
 * Plain HTTP connections are not counted here: they are bounded with the WebSockets,
 * node-wide ({@link socketBound}, socket-bound.ts). Before, a client with no token held
 * every descriptor with idle sockets (secaudit F1), and the node took no new connection,
 * WebSockets, producers' and the load balancer's `/readyz` alike, with nothing logged.
 */
import { readFileSync } from 'node:fs';
import type { Config } from '../config/config.js';
import type { Logger } from '../logger.js';

/**
 * File descriptors kept for everything but WebSockets and the store: producers' HTTP
 * connections ({@link HTTP_SHARE} of them, in the bound on sockets), the node's Redis
 * connections, its reads of other nodes' stores, Node's own (stdio, epoll, the embedded
 * redis-server's pipes: about 60 on an idle node).
 */
export const KEPT_FOR_OTHERS = 1024;

/**
 * Plain HTTP connections (producers', probes', a handshake's before its upgrade) a node
 * takes beside {@link connectionBound}'s WebSockets, in its bound on every socket it
 * accepts ({@link socketBound}): half of {@link KEPT_FOR_OTHERS}, so that the other half
 * stays for the node's own files — its Redis connections, its reads of other nodes' stores,
 * Node's own — whatever its clients open.
 */
export const HTTP_SHARE = 512;

/** The files a store partition's LevelDB holds open at all times: LOCK, LOG, MANIFEST, its log, a compaction's output. */
const FILES_PER_PARTITION = 5;

/**
 * Table files one partition's LevelDB keeps open at most: its table cache holds
 * `max_open_files` less the 10 it keeps for other files (LevelDB 1.20 db_impl.cc), and
 * classic-level opens with `maxOpenFiles` 1000 (src/store/partition-db.ts sets none).
 */
const TABLES_PER_PARTITION = 990;

/**
 * Table files LevelDB maps into memory, for the whole process (1.20 env_posix.cc,
 * `MaxMmaps`, 64-bit): a mapped file's descriptor is closed once mapped. The tables
 * past them keep a descriptor each, up to a fifth of the soft limit (`MaxOpenFiles`).
 */
const MAPPED_TABLES = 1000;

/**
 * The bound when the open-files limit is unknown (no `/proc/self/limits`: not Linux) or
 * unlimited: macOS caps a process at 10,240 files, which this stays under.
 */
export const BOUND_WITHOUT_LIMIT = 10_000;

/** The most the setting takes (src/config/settings.ts `maxConnections`). */
const MAX_BOUND = 10_000_000;

/**
 * The soft limit of open files in the text of a Linux `/proc/<pid>/limits`
 * (proc(5): `Max open files  <soft>  <hard>  files`).
 * @returns the soft limit; undefined when the line is missing or the limit is `unlimited`
 */
export function openFilesLimit(limitsText: string): number | undefined {
  const m = /^Max open files[ \t]+(\d+)[ \t]/m.exec(limitsText);
  return m === null ? undefined : Number(m[1]);
}

/** This process's soft limit of open files, read from `/proc/self/limits`; undefined where there is none. */
export function ownOpenFilesLimit(): number | undefined {
  try {
    return openFilesLimit(readFileSync('/proc/self/limits', 'utf8'));
  } catch {
    return undefined;
  }
}

/**
 * The default of `PIXIU_MAX_CONNECTIONS`: the open-files limit less what the node's
 * other files may need — {@link KEPT_FOR_OTHERS}, and the store's: each partition's own
 * files, and the table files its LevelDB may hold past the ones mapped (at most a fifth
 * of the limit) — and never under half the limit (a small limit, `ulimit -n 256`, keeps
 * half for the rest), nor under 1.
 * @param limit the soft limit of open files; undefined when unknown: {@link BOUND_WITHOUT_LIMIT}
 * @param partitions the store's partitions (`PIXIU_PARTITIONS`)
 * @returns connections, 1 to 10,000,000 (the setting's range)
 */
export function defaultMaxConnections(limit: number | undefined, partitions: number): number {
  if (limit === undefined) return BOUND_WITHOUT_LIMIT;
  const tables = Math.min(Math.max(0, partitions * TABLES_PER_PARTITION - MAPPED_TABLES), Math.floor(limit / 5));
  const kept = KEPT_FOR_OTHERS + partitions * FILES_PER_PARTITION + tables;
  return Math.min(MAX_BOUND, Math.max(1, Math.floor(limit / 2), limit - kept));
}

/**
 * The node's bound on every socket it accepts, WebSockets and plain HTTP connections
 * together (socket-bound.ts sets it as the HTTP server's `maxConnections`; past it a new
 * connection is closed at once): the bound on WebSockets, and room for plain HTTP
 * connections — {@link HTTP_SHARE}, or an eighth of a small open-files limit (under
 * 4096: 128 at 1024, 32 at 256), so that what the node keeps for its own files stays
 * with it. A WebSocket stays one of the HTTP server's connections once upgraded (Node
 * counts its socket until it closes), so both bounds count it: the one on WebSockets
 * refuses a handshake past it with a status (503) while this one still has room to
 * answer it.
 * @param webSockets the bound on WebSockets ({@link connectionBound})
 * @param limit the soft limit of open files; undefined when unknown
 * @returns sockets, `webSockets` + 1 at least
 */
export function socketBound(webSockets: number, limit: number | undefined): number {
  return webSockets + (limit === undefined ? HTTP_SHARE : Math.min(HTTP_SHARE, Math.max(1, Math.floor(limit / 8))));
}

/** A node's bounds on its connections, resolved at start ({@link connectionBound}). */
export interface ConnectionBounds {
  /** WebSocket connections, open or opening (`PIXIU_MAX_CONNECTIONS`): past it a handshake is refused 503. */
  readonly webSockets: number;
  /** Every socket accepted, WebSockets included ({@link socketBound}): past it a new connection is closed at once. */
  readonly sockets: number;
}

/**
 * The node's bounds on its connections: on WebSockets, `PIXIU_MAX_CONNECTIONS` when
 * given, else {@link defaultMaxConnections} of the process's limit; on every socket,
 * {@link socketBound} of it. Logs them in one line at start, with the limit: at info, or
 * at warn when a value given leaves the sockets' bound at or over the limit (the kernel
 * would refuse connections before the node does).
 * @param readLimit reads the soft limit of open files (undefined: unknown); default:
 *   this process's ({@link ownOpenFilesLimit})
 */
export function connectionBound(config: Pick<Config, 'maxConnections' | 'partitions'>, logger: Logger, readLimit = ownOpenFilesLimit): ConnectionBounds {
  const limit = readLimit();
  const webSockets = config.maxConnections ?? defaultMaxConnections(limit, config.partitions);
  const fields = { maxConnections: webSockets, maxSockets: socketBound(webSockets, limit), openFilesLimit: limit ?? null };
  const bounds = { webSockets, sockets: fields.maxSockets };
  if (config.maxConnections === undefined) {
    logger.info(fields, limit === undefined
      ? 'websocket connections bounded (PIXIU_MAX_CONNECTIONS unset, and the open-files limit unknown)'
      : 'websocket connections bounded (PIXIU_MAX_CONNECTIONS unset: derived from the open-files limit)');
  } else if (limit !== undefined && fields.maxSockets >= limit) {
    logger.warn(fields, 'websocket connections bounded by PIXIU_MAX_CONNECTIONS at or over the open-files limit, with the room kept for HTTP connections (maxSockets): past the limit the kernel resets new connections, producers\' too, before the node can refuse them');
  } else {
    logger.info(fields, 'websocket connections bounded (PIXIU_MAX_CONNECTIONS)');
  }
  return bounds;
}
