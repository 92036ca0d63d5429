/**
 * `GET /v1/connect` (DESIGN.md §6): the WebSocket endpoint. Everything that can refuse
 * a connection runs before the upgrade, so a refusal is an HTTP status with the JSON
 * error body: 403 for an Origin not allowed (named, and logged at warn), 401 bad or
 * expired token, 400 bad parameters, 429 over the per-user connection limit (counted
 * across nodes through presence; logged at info) or over the user's handshake rate on
 * this node (with `Retry-After`, before any Redis read: user-rate.ts), 503 when Redis
 * is down, the node is shutting down, it holds `PIXIU_MAX_CONNECTIONS` connections
 * (connection-bound.ts), or it has `PIXIU_MAX_HANDSHAKES` handshakes in progress
 * (handshake-slots.ts). The 403, the connection limit's 429 and the node's bound's 503,
 * which a browser page cannot see, are logged thinned (handshake-refusals.ts).
 */
import { randomBytes } from 'node:crypto';
import { Socket } from 'node:net';
import type { WebSocket } from 'ws';
// Adds `websocket: true` routes and the OpenAPI fields to fastify's route types.
import type {} from '@fastify/swagger';
import type {} from '@fastify/websocket';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { bearerToken } from '../auth/api-token.js';
import type { ClientClaims } from '../auth/jwt.js';
import { PixiuError } from '../errors.js';
import type { ResumeRequest } from '../delivery/machine.js';
import { wordedPattern } from '../api/pattern-rules.js';
import { PIPELINED_WORDS, device as deviceSchema, errorBody, retryAfterHeader, seqCursor } from '../api/schemas.js';
import { isStreamId } from '../streams/stream-id.js';
import type { GatewayDeps } from './gateway-deps.js';
import { CloseCode } from '../delivery/close-codes.js';
import { WsConnection } from './ws-connection.js';
import { MAX_TOKEN_CHARS } from '../auth/jwt-form.js';
import { closeReason } from './close-log.js';
import type { HttpServerSocket } from '../api/error-handler.js';
import { quotedText } from '../text-cut.js';
import { HandshakeRefusals } from './handshake-refusals.js';
import { ORIGIN_FORM, serializedOrigin } from './web-origin.js';
import { UserRates, overRate, type RateLimit } from './user-rate.js';
import { AbandonedHandshakes, clientGone } from './abandoned-handshakes.js';
import { HandshakeSlots } from './handshake-slots.js';
import type { UpgradeGuard } from './upgrade-guard.js';
import { isUpgrade } from '../api/upgrade-request.js';
import { clientFields } from '../api/client-ip.js';

/** Query of `/v1/connect`. */
interface ConnectQuery {
  device: string;
  last_seq?: number;
  epoch?: string;
  from?: 'latest';
  last_bseq?: string;
  token?: string;
}

/** What the checks before the upgrade established. */
interface Handshake {
  readonly claims: ClientClaims;
  readonly conn: string;
  readonly resume: ResumeRequest;
  readonly since: number;
  /** Removes the presence entry if the WebSocket never opens (bound to the socket's close). */
  dropUnopened: () => void;
  /** Set once the WebSocket is open; until then the presence entry is provisional. */
  opened: boolean;
}

const connectQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    device: { ...deviceSchema, default: 'default' },
    last_seq: { ...seqCursor, description: 'the last seq this device received; delivery resumes after it' },
    epoch: { type: 'string', minLength: 1, maxLength: 64, description: 'the epoch last_seq belongs to' },
    from: { type: 'string', enum: ['latest'], description: 'latest: skip history, only new messages' },
    last_bseq: { type: 'string', pattern: wordedPattern('^\\d{1,20}-\\d{1,20}$', 'a bseq as a bcast frame gives it: two whole numbers joined by - (like 1718000000000-0)'), description: 'the last broadcast received' },
    // Empty is no token: not read beside the header, "a token is required" without it.
    token: { type: 'string', maxLength: MAX_TOKEN_CHARS, description: 'the JWT, when no Authorization header can be set (not read when the header is sent; empty: none)' },
  },
} as const;

/** Its 429s (docs/protocol.md "Connecting"): `Retry-After` on all but the per-user connection limit's. */
const connectRateLimitedAnswer = {
  ...errorBody,
  description: `RATE_LIMITED: the user's connections (PIXIU_MAX_CONNECTIONS_PER_USER; no Retry-After) or handshakes (PIXIU_CONNECT_BURST, PIXIU_CONNECT_RATE) on this node are over their limit. Or ${PIPELINED_WORDS}`,
  headers: { 'Retry-After': { ...retryAfterHeader['Retry-After'], required: false } },
} as const;

/**
 * Whether a browser Origin may connect (DESIGN.md §10 `PIXIU_ALLOWED_ORIGINS`): no
 * Origin (a non-browser client) is allowed; `*` allows any; a list allows its origins
 * (scheme, host and port); an empty list allows only an Origin whose host and port are
 * the request's own Host, of any scheme. The scheme is not compared there because the
 * node cannot know the one the page used: behind a reverse proxy that terminates TLS
 * the node is reached over http while the page's Origin is `https://…` (and the Host
 * it sees is the one the browser sent, when the proxy passes it on). A page of the
 * same host on the other scheme is the same site to the user; a list names exactly
 * which scheme when that matters.
 *
 * A browser sends its serialized origin (RFC 6454 §6.1: `scheme://host[:port]`, lower
 * case, no default port, no path or credentials). The Origin is compared as the
 * WHATWG URL parser serializes it, like the list's entries, so `https://APP.example.com`
 * and `https://app.example.com:443` are `https://app.example.com` (RFC 6454 §4: scheme
 * and host are case-insensitive, the default port is no port). An Origin that is not
 * of the form `scheme://host[:port]` (`https://host/path`, `https://user@host`, `null`)
 * does not come from a browser and is refused, rather than being matched on the host
 * it happens to contain.
 */
export function originAllowed(origin: string | undefined, host: string | undefined, allowed: readonly string[]): boolean {
  if (origin === undefined) return true;
  if (allowed.includes('*')) return true;
  // Before any match: an entry with a path or credentials must not admit an Origin equal to it.
  if (!ORIGIN_FORM.test(origin)) return false;
  // Exact: it also covers origins with no URL serialization (`chrome-extension://id`).
  if (allowed.includes(origin)) return true;
  const own = serializedOrigin(origin);
  if (own === undefined) return false;
  // A list entry is compared as an origin, so `https://App.example.com/` names `https://app.example.com`.
  if (allowed.length > 0) return allowed.some((a) => serializedOrigin(a) === own);
  // Host is case-insensitive and may carry the default port (RFC 9110 §7.2): compare it
  // as an origin of the Origin's scheme.
  return host !== undefined && serializedOrigin(`${new URL(origin).protocol}//${host}`) === own;
}

/**
 * The entries of a `PIXIU_ALLOWED_ORIGINS` list that name no web origin (RFC 6454:
 * `scheme://host[:port]`, an http(s) URL): a typo like `notaurl`, or a non-web origin
 * like `chrome-extension://id`. Such an entry allows only an Origin header equal to
 * it, which is right for the second and silently useless for the first; `serve` warns
 * about them at start. (`https://App.example.com/` is a web origin: it is compared as
 * `https://app.example.com`.)
 */
export function nonWebOrigins(allowed: readonly string[]): string[] {
  return allowed.filter((a) => a !== '*' && serializedOrigin(a) === undefined);
}

/**
 * The entries of a `PIXIU_ALLOWED_ORIGINS` list that say more than an origin and are
 * read as less: a path (`https://app.example.com/login`: only its origin counts),
 * credentials (ignored), or a wildcard (`https://*.example.com`: no wildcards; it
 * allows only an Origin equal to it). `serve` warns about them at start.
 */
export function looseOrigins(allowed: readonly string[]): string[] {
  return allowed.filter((a) => a !== '*' && serializedOrigin(a) !== undefined && (a.includes('*') || !ORIGIN_FORM.test(a.replace(/\/$/, ''))));
}

/**
 * Lets go of the upgrade request once the WebSocket is open. @fastify/websocket leaves
 * the HTTP response assigned to the socket and an `error` listener whose closure holds
 * the fastify request and reply; through them the request's headers (the JWT among
 * them), its logger and fastify's objects stayed alive as long as the connection:
 * about 3 KiB of heap per idle connection (bench:e2e, case c). The connection's own
 * `error` listener (ws-connection.ts) replaces the plugin's.
 */
function releaseUpgradeRequest(req: FastifyRequest, socket: WebSocket, hs: Handshake): void {
  const raw = req.raw.socket as HttpServerSocket;
  raw.off('close', hs.dropUnopened);
  raw._httpMessage?.detachSocket(raw);
  socket.removeAllListeners('error');
}

/** What `ws` accepts as a Sec-WebSocket-Key: 16 bytes in base64 (RFC 6455 §4.1). */
const WS_KEY = /^[+/0-9A-Za-z]{22}==$/;

/**
 * The handshake headers `ws` checks in its upgrade, checked first: `ws` would refuse
 * them with its own 400 in text/html, after the presence entry is written; here the
 * refusal is the catalogue's JSON body like every other one.
 */
function checkWebSocketHeaders(req: FastifyRequest, reply: FastifyReply): void {
  // RFC 6455 §4.1: "an HTTP/1.1 or higher GET request".
  if (req.raw.httpVersionMajor < 1 || (req.raw.httpVersionMajor === 1 && req.raw.httpVersionMinor < 1)) {
    throw new PixiuError('INVALID_REQUEST', `a WebSocket handshake needs HTTP/1.1, not HTTP/${req.raw.httpVersion} (RFC 6455 §4.1)`);
  }
  const upgrade = req.headers.upgrade;
  if (upgrade === undefined || upgrade.toLowerCase() !== 'websocket') {
    throw new PixiuError('INVALID_REQUEST', `Upgrade header must be websocket, not ${quotedText(upgrade ?? '', 100)}`);
  }
  const key = req.headers['sec-websocket-key'];
  if (typeof key !== 'string' || !WS_KEY.test(key)) {
    throw new PixiuError('INVALID_REQUEST', 'missing or invalid Sec-WebSocket-Key header (16 bytes in base64)');
  }
  // 13 only (RFC 6455), which every browser in use sends. `ws` also takes 8 (the
  // hybi-08 draft), whose browsers sent Sec-WebSocket-Origin rather than Origin: the
  // Origin check would let such a page through unchecked.
  if (Number(req.headers['sec-websocket-version']) !== 13) {
    // RFC 6455 §4.4: the refusal names the version the server speaks.
    reply.header('sec-websocket-version', '13');
    throw new PixiuError('INVALID_REQUEST', 'missing or invalid Sec-WebSocket-Version header (only 13, RFC 6455)');
  }
  const protocols = req.headers['sec-websocket-protocol'];
  if (protocols !== undefined && !validProtocolList(protocols)) {
    throw new PixiuError('INVALID_REQUEST', 'invalid Sec-WebSocket-Protocol header (a comma-separated list of distinct tokens)');
  }
}

/** An RFC 7230 token. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** Whether a Sec-WebSocket-Protocol value is one `ws` accepts: distinct tokens, comma-separated. */
function validProtocolList(header: string): boolean {
  const seen = new Set<string>();
  for (const part of header.split(',')) {
    const protocol = part.replace(/^[ \t]+|[ \t]+$/g, '');
    if (!TOKEN.test(protocol) || seen.has(protocol)) return false;
    seen.add(protocol);
  }
  return true;
}

/** A new connection id: 16 hex digits. */
function newConnId(): string {
  return randomBytes(8).toString('hex');
}

/** The refusal of a handshake on a node that is shutting down (503, docs/protocol.md). */
function shuttingDown(): PixiuError {
  return new PixiuError('UNAVAILABLE', 'this node is shutting down; reconnect');
}

/** Registers `/v1/connect`; `upgrades` counts the sockets `deps.maxConnections` bounds. */
export function connectRoute(app: FastifyInstance, deps: GatewayDeps, upgrades: UpgradeGuard): void {
  const handshakes = new WeakMap<FastifyRequest, Handshake>();
  const claimsOf = new WeakMap<FastifyRequest, ClientClaims>();
  const handshakeLimit: RateLimit = { burst: deps.config.connectBurst, perMinute: deps.config.connectRatePerMinute };
  const handshakeRates = new UserRates(handshakeLimit);
  // A browser never shows JavaScript the 403's or 429's body (the page sees a failed
  // socket, 1006), so those refusals are logged too, thinned: any page may send handshakes.
  const refusals = new HandshakeRefusals(deps.logger, deps.config);
  const abandoned = new AbandonedHandshakes(deps);
  // Node-wide, all users: each handshake's slot is given back once its welcome is out,
  // it is answered with a refusal, or its socket closes (handshake-slots.ts).
  const slots = new HandshakeSlots(deps.config.maxHandshakes);
  const releases = new WeakMap<FastifyRequest, () => void>();

  app.get<{ Querystring: ConnectQuery }>('/v1/connect', {
    websocket: true,
    // Its refusals, whatever refuses them, count in pixiu_ws_handshakes_total (src/api/refusal-counts.ts).
    config: { wsHandshake: true },
    schema: {
      summary: 'Open the WebSocket (protocol v1)',
      description: 'Upgrades to a WebSocket carrying JSON frames (see docs/protocol.md). Refusals happen before the upgrade with an HTTP status and the JSON error body.',
      tags: ['gateway'],
      querystring: connectQuery,
      // Its 429s declared apart from `4xx` (walk26 L2), with a Retry-After not always sent.
      response: { 429: connectRateLimitedAnswer, '4xx': errorBody, '5xx': errorBody },
    },
    // Origin, then the token: before the query is even validated, nothing about the
    // service is revealed to a client that may not connect.
    onRequest: async (req, reply) => {
      if (!deps.state.accepting) throw shuttingDown();
      // Before the token and the handshake slot: a full node refuses at once, below the
      // open-files limit past which the kernel would reset producers' connections too.
      // A plain GET (no upgrade) is an HTTP connection like a producer's: not counted. The
      // guard counts every upgrade socket until it closes, this one included (upgrade-guard.ts).
      if (isUpgrade(req) && upgrades.open > deps.maxConnections) {
        throw refusals.nodeFull(upgrades.open - 1, deps.maxConnections, () => clientFields(req));
      }
      // Before the token: a herd over the bound costs the node next to nothing.
      const taken = slots.take();
      const socket = req.raw.socket;
      // Its listeners go with the slot: none keeps the request alive with the connection.
      const release = (): void => {
        taken();
        reply.raw.off('finish', release);
        socket.off('close', release);
      };
      releases.set(req, release);
      reply.raw.once('finish', release);
      if (socket.destroyed) release();
      else socket.once('close', release);
      if (!originAllowed(req.headers.origin, req.headers.host, deps.config.allowedOrigins)) {
        throw refusals.origin(req.headers.origin as string, req.headers.host, () => clientFields(req));
      }
      const raw = bearerToken(req.headers.authorization) ?? (new URL(req.url, 'http://x').searchParams.get('token') || undefined);
      if (raw === undefined) throw new PixiuError('UNAUTHORIZED', 'a token is required: Authorization: Bearer <jwt> or ?token=<jwt>');
      const claims = await deps.verify(raw, () => clientFields(req));
      // Each handshake costs the node its cursor reads and a window sent from the inbox
      // (6 MiB of large messages): one user's devices reconnecting in a loop held the
      // node (a hostile-client tester's finding). Refused here, before any Redis read.
      const retryAfter = handshakeRates.take(claims.user);
      if (retryAfter > 0) throw overRate('WebSocket handshakes', handshakeLimit, retryAfter, 'PIXIU_CONNECT_BURST, PIXIU_CONNECT_RATE');
      claimsOf.set(req, claims);
    },
    preHandler: async (req, reply) => {
      const claims = claimsOf.get(req);
      if (!claims) throw new PixiuError('UNAUTHORIZED', 'a token is required');
      // A plain GET would reach the presence write below and leave an entry of a
      // connection that never exists (counted against the user's limit until it
      // expires), then get an empty 404 from @fastify/websocket: refuse it here.
      // A HEAD (fastify answers one beside every GET) opens no WebSocket, yet with the
      // upgrade headers it ran the whole handshake — the presence write replaced the
      // device's open socket (4002) — and then got an empty 404: refused here as well.
      if (req.method === 'HEAD') throw new PixiuError('INVALID_REQUEST', 'HEAD /v1/connect opens no WebSocket: send GET with Upgrade: websocket');
      if (!req.ws) throw new PixiuError('INVALID_REQUEST', 'GET /v1/connect is a WebSocket endpoint: send an Upgrade: websocket request');
      checkWebSocketHeaders(req, reply);
      const q = req.query;
      if (q.from !== undefined && q.last_seq !== undefined) {
        throw new PixiuError('INVALID_REQUEST', 'give last_seq or from=latest, not both');
      }
      if (q.epoch !== undefined && q.last_seq === undefined) {
        throw new PixiuError('INVALID_REQUEST', 'epoch goes with last_seq');
      }
      // The schema checks the shape; a part above 2^64 − 1 has it but is no stream id.
      if (q.last_bseq !== undefined && !isStreamId(q.last_bseq)) {
        // Worded as the schema words its shape (the querystring path, the same rule), plus the range.
        throw new PixiuError('INVALID_REQUEST', 'querystring/last_bseq must be a bseq as a bcast frame gives it: two whole numbers joined by - (like 1718000000000-0), each at most 2^64-1');
      }
      let resume: ResumeRequest;
      if (q.from === 'latest') resume = { kind: 'latest' };
      else if (q.last_seq !== undefined) resume = q.epoch === undefined ? { kind: 'after', seq: q.last_seq } : { kind: 'after', seq: q.last_seq, epoch: q.epoch };
      else {
        // The acks this node holds for the user go to Redis first: a device that acked,
        // closed and came straight back (or replaced its live connection) resumes after
        // its last ack, not after the last one written (cursors are written every
        // PIXIU_ACK_FLUSH_INTERVAL). flushAcks never rejects.
        await deps.hub.flushAcks(claims.user);
        // With the epoch it counts in: an inbox recreated before the first read, or one
        // rotated since the device's last ack (its cursor kept of the old epoch), resets it.
        const cursor = await deps.inbox.deviceCursor(claims.user, q.device);
        if (cursor === undefined) resume = { kind: 'first' };
        else resume = cursor.epoch === undefined ? { kind: 'after', seq: cursor.seq } : { kind: 'after', seq: cursor.seq, epoch: cursor.epoch };
      }
      // A client that has already left (its FIN or RST right behind the request: a
      // handshake it gave up on, on a slow uplink) must not replace the device's live
      // connection below: nothing is written, nothing closed, and no answer is sent.
      if (await clientGone(req.raw.socket)) {
        abandoned.drop(req, reply, claims.user, q.device);
        return;
      }
      // Shutdown may have begun while the token or the cursors were read: it closed the
      // connections there were, so this one is refused (and once past here, closed
      // 1001 as it opens, below).
      if (!deps.state.accepting) throw shuttingDown();
      const conn = newConnId();
      const since = Date.now();
      const added = await deps.presence.add(claims.user, conn, q.device, since);
      if (!added.admitted) throw refusals.connectionLimit(claims.user, q.device, () => clientFields(req));
      // Until its WebSocket opens, a kick of this connection (another handshake of the
      // same device, an admin disconnect) is kept for it (pending-handshakes.ts).
      deps.handshakes.add(conn, claims.user, q.device);
      // The client may have left while the entry was written (its FIN or RST came
      // during that round trip): the connections it replaced get their entries back and
      // stay open. A client that leaves after this check replaces them (4002) as any
      // new connection does (docs/decisions.md, "Abandoned handshakes").
      if (added.replaced.length > 0 && await clientGone(req.raw.socket)) {
        await abandoned.withdraw(claims.user, conn, q.device, added.replaced);
        abandoned.drop(req, reply, claims.user, q.device);
        return;
      }
      deps.kickReplaced(claims.user, added.replaced);
      const hs: Handshake = { claims, conn, resume, since, opened: false, dropUnopened: () => undefined };
      handshakes.set(req, hs);
      // The upgrade can still fail after this (the client goes away, or `ws` refuses a
      // handshake the checks above let through): then no connection will ever remove
      // this entry, so the socket's close does, unless the WebSocket opened.
      hs.dropUnopened = (): void => {
        if (hs.opened) return;
        deps.handshakes.settle(conn);
        deps.presence.remove(claims.user, conn).catch(() => undefined);
      };
      if (req.raw.socket.destroyed) hs.dropUnopened();
      else req.raw.socket.once('close', hs.dropUnopened);
    },
  }, (socket, req) => {
    deps.onAccepted();
    const hs = handshakes.get(req);
    if (!hs) {
      socket.close(CloseCode.policy, 'handshake missing');
      deps.onClosedAtOpen(CloseCode.policy);
      return;
    }
    const kick = deps.handshakes.settle(hs.conn);
    if (kick !== undefined) {
      // Kicked while its upgrade was under way (a newer handshake of the same device
      // replaced it): closed at once, never delivered to; the socket's close drops its
      // presence entry if it still has one.
      // Cut as WsConnection.close cuts it: a bus kick's reason may be longer than a close frame carries.
      socket.close(kick.code, closeReason(kick.reason));
      deps.onClosedAtOpen(kick.code);
      return;
    }
    if (!deps.state.accepting) {
      // Shutdown began during the upgrade, after it closed every open connection
      // (1001): this one gets the same close; the socket's close drops its presence.
      socket.close(CloseCode.goingAway, 'server shutting down');
      deps.onClosedAtOpen(CloseCode.goingAway);
      return;
    }
    hs.opened = true;
    releaseUpgradeRequest(req, socket, hs);
    const connection = new WsConnection(socket, {
      id: hs.conn, user: hs.claims.user, device: req.query.device, expiresAtMs: hs.claims.expiresAtMs, since: hs.since,
      tags: hs.claims.tags, channels: hs.claims.channels,
    }, deps.connection, req.raw.socket instanceof Socket ? req.raw.socket : undefined);
    connection.start(hs.resume, { lastBseq: req.query.last_bseq, onWelcome: releases.get(req), client: () => clientFields(req) });
    deps.onOpen(connection, hs.claims);
  });
}
