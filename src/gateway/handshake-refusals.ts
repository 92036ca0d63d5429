/**
 * The WebSocket handshake refusals a browser page cannot see (docs/protocol.md,
 * "Browsers see none of these": the page gets a socket that closes 1006, never the
 * status), answered as usual and also logged by the node, each kind thinned to one
 * line per {@link OUTAGE_LOG_INTERVAL_MS} carrying `notLogged` (log-throttle.ts), since
 * any page may send handshakes in a loop. Each line carries the request's `reqId` (its
 * answer's `X-Request-Id`) and the client's `ip` (client-ip.ts: the TCP peer's, or the
 * one PIXIU_TRUST_PROXY's proxies name), both read only for a line written:
 *
 * - an Origin not allowed (403) at warn: the operator's setting is wrong, or a page
 *   that should not connect tries to;
 * - the user's connection limit (429) at info: client behaviour (a sixth tab), not a
 *   fault of the node, but the page only shows "connection failing" and its developer
 *   or operator had no line to find why (a browser tester's finding: debug only);
 * - the node's bound on its connections (503) at warn: the node is full, which its
 *   operator must see (walk13 §4: past the open-files limit the kernel's resets were
 *   seen nowhere).
 *
 * It also marks the 503s of the node's own bounds (`busy`, `full`: {@link markBoundRefusal}),
 * which `pixiu_ws_handshakes_total` counts under those outcomes rather than `UNAVAILABLE`.
 */
import { PixiuError, unavailable } from '../errors.js';
import type { Logger } from '../logger.js';
import { LogThrottle, OUTAGE_LOG_INTERVAL_MS, thinnedFields } from '../log-throttle.js';
import { cutText, quotedText } from '../text-cut.js';
import type { BoundRefusal } from '../api/metric-labels.js';
import { isWebOrigin } from './web-origin.js';
import type { ClientOf } from '../api/client-ip.js';

/**
 * The refusals of the node's own bounds, each with its `outcome` in
 * `pixiu_ws_handshakes_total` (src/api/refusal-counts.ts): they are 503 `UNAVAILABLE`
 * like Redis's, and told apart by this mark alone.
 */
const boundRefusals = new WeakMap<PixiuError, BoundRefusal>();

/**
 * Marks `err` as the refusal of a handshake for one of the node's bounds: `busy`, its
 * handshakes in progress (`PIXIU_MAX_HANDSHAKES`, handshake-slots.ts); `full`, its
 * connections (`PIXIU_MAX_CONNECTIONS`, {@link HandshakeRefusals.nodeFull}).
 * @returns `err`
 */
export function markBoundRefusal(err: PixiuError, kind: BoundRefusal): PixiuError {
  boundRefusals.set(err, kind);
  return err;
}

/** The bound `err` was marked as refused for ({@link markBoundRefusal}); undefined for any other error. */
export function boundRefusal(err: PixiuError): BoundRefusal | undefined {
  return boundRefusals.get(err);
}

/** Most characters of an Origin header that a refusal and its log line repeat. */
const MAX_ORIGIN_SHOWN = 100;

/**
 * The warn line of a refused Origin with `PIXIU_ALLOWED_ORIGINS` unset, where what is
 * compared is the Origin's host and port with the request's `Host` (connect-route.ts `originAllowed`).
 */
export const ORIGIN_NOT_HOST = "websocket handshake refused: its origin's host and port are not the request's Host (PIXIU_ALLOWED_ORIGINS unset)";

/**
 * The warn line of a refused Origin that is no web origin (`null`, sent by a page opened
 * from a file — the first a web developer meets — or a sandboxed frame;
 * `chrome-extension://id`), with `PIXIU_ALLOWED_ORIGINS` unset: it has no host and port
 * to compare, which {@link ORIGIN_NOT_HOST} would speak of (a browser tester's nit N1).
 */
const ORIGIN_NOT_WEB = 'websocket handshake refused: its origin is no web origin scheme://host[:port] (null: a page opened from a file, a sandboxed frame), which PIXIU_ALLOWED_ORIGINS unset never allows';

/** The info line of a handshake refused 429 for the user's connection limit. */
export const CONNECTION_LIMIT_LINE = 'websocket handshake refused: the user has PIXIU_MAX_CONNECTIONS_PER_USER connections already';

/** The warn line of a handshake refused 503 for the node's bound on its connections. */
export const NODE_FULL_LINE = 'websocket handshake refused: this node holds PIXIU_MAX_CONNECTIONS connections already';

/** One node's refusals of handshakes, each answered with its error and logged, thinned (see the module's doc). */
export class HandshakeRefusals {
  readonly #logger: Logger;
  /** `PIXIU_ALLOWED_ORIGINS`; empty: unset. */
  readonly #allowedOrigins: readonly string[];
  /** `PIXIU_MAX_CONNECTIONS_PER_USER`. */
  readonly #maxPerUser: number;
  readonly #origins = new LogThrottle(OUTAGE_LOG_INTERVAL_MS);
  readonly #limits = new LogThrottle(OUTAGE_LOG_INTERVAL_MS);
  readonly #full = new LogThrottle(OUTAGE_LOG_INTERVAL_MS);

  constructor(logger: Logger, config: { readonly allowedOrigins: readonly string[]; readonly maxConnectionsPerUser: number }) {
    this.#logger = logger;
    this.#allowedOrigins = config.allowedOrigins;
    this.#maxPerUser = config.maxConnectionsPerUser;
  }

  /**
   * A browser Origin that may not connect: logged at warn, naming the rule that
   * refused it (the list, or with it unset the request's `Host`, which a reverse proxy
   * may rewrite, or for an Origin that is no web origin its form), with the origin cut (not quoted again: the log line is JSON).
   * @param origin the Origin header
   * @param host the request's Host header
   * @param client reads the request's `reqId` and the client's address (client-ip.ts)
   * @returns the 403 to answer: the Origin quoted, escaped and cut
   */
  origin(origin: string, host: string | undefined, client: ClientOf): PixiuError {
    const left = this.#origins.take();
    if (left !== undefined) {
      const fields = { origin: cutText(origin, MAX_ORIGIN_SHOWN), ...client(), ...thinnedFields(left) };
      if (this.#allowedOrigins.length > 0) this.#logger.warn(fields, 'websocket handshake refused: its origin is not in PIXIU_ALLOWED_ORIGINS');
      else if (!isWebOrigin(origin)) this.#logger.warn(fields, ORIGIN_NOT_WEB);
      else this.#logger.warn({ ...fields, host: host === undefined ? null : cutText(host, MAX_ORIGIN_SHOWN) }, ORIGIN_NOT_HOST);
    }
    // Quoted, escaped (Node lets bytes 0x80–0xff through, as U+0080–U+00FF) and cut.
    return new PixiuError('FORBIDDEN', `Origin ${quotedText(origin, MAX_ORIGIN_SHOWN)} is not allowed (PIXIU_ALLOWED_ORIGINS lists the origins allowed, scheme, host and port; unset, only an origin whose host and port are this request's Host, of any scheme)`);
  }

  /**
   * A handshake of a user who already has `PIXIU_MAX_CONNECTIONS_PER_USER` connections
   * (presence, all nodes): logged at info with `user`, `device`, `reqId`, `ip` and `limit`.
   * @param client reads the request's `reqId` and the client's address (client-ip.ts)
   * @returns the 429 to answer, naming the setting and what frees a place (no
   *   `Retry-After`: docs/protocol.md, "Connecting", 429)
   */
  connectionLimit(user: string, device: string, client: ClientOf): PixiuError {
    const left = this.#limits.take();
    if (left !== undefined) this.#logger.info({ user, device, ...client(), limit: this.#maxPerUser, ...thinnedFields(left) }, CONNECTION_LIMIT_LINE);
    return new PixiuError('RATE_LIMITED', `user ${user} already has ${this.#maxPerUser} connections, on all nodes (PIXIU_MAX_CONNECTIONS_PER_USER); wait for one to close, or DELETE /v1/users/{uid}/connections frees them at once`);
  }

  /**
   * A handshake past the node's bound on its connections (`PIXIU_MAX_CONNECTIONS`,
   * connection-bound.ts): logged at warn with `open`, `limit`, the request's `reqId` and the client's `ip`.
   * @param open the connections the node holds besides this one, open or opening
   * @param limit the bound
   * @param client reads the request's `reqId` and the client's address (client-ip.ts)
   * @returns the 503 to answer, with `Retry-After`, marked `full` ({@link markBoundRefusal})
   */
  nodeFull(open: number, limit: number, client: ClientOf): PixiuError {
    const left = this.#full.take();
    if (left !== undefined) this.#logger.warn({ open, limit, ...client(), ...thinnedFields(left) }, NODE_FULL_LINE);
    return markBoundRefusal(unavailable(`this node holds as many WebSocket connections as it takes (${open} open or opening: PIXIU_MAX_CONNECTIONS); retry after its Retry-After`), 'full');
  }
}
