/**
 * The node's bound on every socket it accepts, WebSockets and plain HTTP connections
 * together (connection-bound.ts `socketBound`; docs/decisions.md, "A node's bound on its
 * sockets"). Set as the HTTP server's `maxConnections`: Node then closes a connection
 * accepted past it at once, before reading anything from it, and emits `drop` (net.Server,
 * Node ≥ 18.6). A WebSocket stays one of the server's connections once upgraded, so the
 * bound counts it with the plain ones.
 *
 * Without it, a client with no token held the node's every file descriptor with idle
 * sockets (secaudit F1: ~`ulimit -n` of them, sending nothing): `accept` then failed with
 * EMFILE, and every new connection — producers', WebSockets, the load balancer's
 * `/readyz` — timed out or was reset, the node's own Redis reconnects and store files
 * could find no descriptor either, and nothing was logged. Past the bound the client sees
 * its connection closed at once, the node keeps the descriptors it needs for itself, and
 * the operator sees a counter and a warn line.
 */
import type { Server } from 'node:net';
import type { SocketMetrics } from '../api/socket-metrics.js';
import type { Logger } from '../logger.js';
import { LogThrottle, OUTAGE_LOG_INTERVAL_MS, thinnedFields } from '../log-throttle.js';

/** The warn line of connections closed at once past the bound (thinned: one per {@link OUTAGE_LOG_INTERVAL_MS} at most). */
export const SOCKETS_FULL_LINE = 'new connection closed at once: this node holds as many sockets as it takes '
  + '(maxSockets: the WebSocket bound, PIXIU_MAX_CONNECTIONS, and room for plain HTTP connections); '
  + 'idle connections from one address or many? cap connections per client at the reverse proxy (README "On the internet")';

/** What {@link boundSockets} needs besides the server. */
export interface SocketBoundOptions {
  /** The bound: sockets open at once, at least 1. */
  readonly maxSockets: number;
  /** Where a drop is logged, at warn, thinned. */
  readonly logger: Logger;
  /** The bound's metrics: set here, the open sockets read when scraped, each drop counted. */
  readonly metrics: SocketMetrics;
  /** Upgrade sockets open now (upgrade-guard.ts), for the line: how many of the sockets are WebSockets. */
  readonly upgradeSockets: () => number;
}

/**
 * Bounds the sockets `server` holds at once to `opts.maxSockets`: each connection past it
 * is closed at once by Node, counted and logged (the first, then at most one per
 * {@link OUTAGE_LOG_INTERVAL_MS} with how many were not logged).
 */
export function boundSockets(server: Server, opts: SocketBoundOptions): void {
  server.maxConnections = opts.maxSockets;
  opts.metrics.max.set(opts.maxSockets);
  // Node's own count, kept from accept to close, upgraded sockets included (net.Server
  // `_connections`; `getConnections` gives the same through a callback).
  opts.metrics.watch(() => (server as Server & { _connections: number })._connections);
  const thinning = new LogThrottle(OUTAGE_LOG_INTERVAL_MS);
  // `data` names the TCP connection (undefined for a server not on TCP: a unix socket).
  server.on('drop', (data?: { remoteAddress?: string }) => {
    opts.metrics.dropped.inc();
    const left = thinning.take();
    if (left === undefined) return;
    opts.logger.warn({
      maxSockets: opts.maxSockets, upgradeSockets: opts.upgradeSockets(),
      ...(data?.remoteAddress === undefined ? {} : { peer: data.remoteAddress }), ...thinnedFields(left),
    }, SOCKETS_FULL_LINE);
  });
}
