/**
 * The label sets of the service's metrics (metrics.ts): the closed sets whose series
 * start at 0, the label objects of the frequent calls, built once, and the route config
 * (fastify's `FastifyContextConfig`) that says how a route's refusals are counted.
 */
import type { AckOutcome } from '../delivery/effects.js';
import type { FetchRead } from '../delivery/session.js';
import { CloseCode } from '../delivery/close-codes.js';
import type { FrameType } from '../delivery/frames.js';

// The routes' own config, read by the error handler's counts (refusal-counts.ts).
declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The ingest route a route is, for `pixiu_ingest_messages_total`: on
     * `POST /v1/messages`, `/v1/broadcast` and `/v1/channels/{channel}/publish` a refused
     * request is one refused message, whatever refused it (its JSON, its schema, its
     * token, or the handler), so the error handler counts it (src/api/refusal-counts.ts). Never
     * `batch`: a batch counts its items itself.
     */
    ingestRoute?: Exclude<IngestRoute, 'batch'>;
    /**
     * True on `GET /v1/connect`: a refused handshake is counted by its code in
     * `pixiu_ws_handshakes_total`, whatever refused it (the error handler counts it).
     */
    wsHandshake?: boolean;
  }
}

/**
 * The `t` of every frame the server sends (docs/protocol.md), the `t` label of
 * `pixiu_ws_frames_sent_total`: the keys of a record over `FrameType`, so that a frame
 * type added there and not here fails to compile.
 */
export const SERVER_FRAME_TYPES = Object.keys({
  welcome: true, msg: true, gap: true, reset: true, bcast: true, pub: true, subscribed: true, pong: true, error: true,
} satisfies Record<FrameType, true>);

/**
 * The close codes the server decides (close-codes.ts, and 1011 for an UNAVAILABLE or
 * INTERNAL error: src/errors.ts), whose `by="server"` series start at 0.
 */
export const SERVER_CLOSE_CODES: readonly number[] = [...new Set([...Object.values(CloseCode), 1011])];

/**
 * The ingest routes, as the `route` label names them: `POST /v1/messages`,
 * `POST /v1/messages/batch`, `POST /v1/broadcast`, `POST /v1/channels/{channel}/publish`.
 */
export type IngestRoute = 'message' | 'batch' | 'broadcast' | 'channel';

/** Every {@link IngestRoute}, for the series started at 0. */
export const INGEST_ROUTES = Object.keys({ message: true, batch: true, broadcast: true, channel: true } satisfies Record<IngestRoute, true>) as IngestRoute[];

/** What became of a client's `ack` frame, the `outcome` of `pixiu_acks_total` (src/delivery/effects.ts). */
export type AckLabel = AckOutcome;

/**
 * The `outcome`s of `pixiu_ws_handshakes_total` other than an error code: `accepted`
 * (the WebSocket opened: 101), `abandoned` (its client left before it took effect), and
 * the two 503 `UNAVAILABLE` refusals of the node's own bounds, told apart from Redis's
 * (src/gateway/handshake-refusals.ts marks them): `busy` (`PIXIU_MAX_HANDSHAKES` in
 * progress) and `full` (`PIXIU_MAX_CONNECTIONS` held). Their series start at 0.
 */
export const HANDSHAKE_OUTCOMES = ['accepted', 'abandoned', 'busy', 'full'] as const;

/** One of {@link HANDSHAKE_OUTCOMES}. */
export type HandshakeOutcome = typeof HANDSHAKE_OUTCOMES[number];

/** The {@link HANDSHAKE_OUTCOMES} of a handshake refused for one of the node's bounds. */
export type BoundRefusal = Exclude<HandshakeOutcome, 'accepted' | 'abandoned'>;

/**
 * The error codes a WebSocket handshake is refused with (docs/protocol.md, "Connecting"),
 * whose `pixiu_ws_handshakes_total` series start at 0 beside `accepted`. Another code of
 * the catalogue (an INTERNAL, say) appears at its first event.
 */
export const HANDSHAKE_REFUSALS = ['INVALID_REQUEST', 'UNAUTHORIZED', 'FORBIDDEN', 'RATE_LIMITED', 'UNAVAILABLE'] as const;

/**
 * Label sets of the ingest metrics, built once: prom-client validates and hashes the
 * labels of every call, and these calls run once per request or message.
 */
export const ROUTE_LABELS = Object.fromEntries(INGEST_ROUTES.map((route) => [route, Object.freeze({ route })])) as Readonly<Record<IngestRoute, { route: IngestRoute }>>;
/** `route` and `outcome` label sets of `pixiu_ingest_messages_total`, per ingest route, built once (as above). */
export const OUTCOME_LABELS = Object.fromEntries(INGEST_ROUTES.map((route) => [route, {
  created: Object.freeze({ route, outcome: 'created' }),
  duplicate: Object.freeze({ route, outcome: 'duplicate' }),
}])) as Readonly<Record<IngestRoute, Readonly<Record<'created' | 'duplicate', { route: IngestRoute; outcome: string }>>>>;

/** `outcome` label sets of `pixiu_acks_total`, built once (an ack is the most frequent client frame). */
export const ACK_LABELS: Readonly<Record<AckLabel, { outcome: AckLabel }>> = {
  moved: Object.freeze({ outcome: 'moved' }),
  refused: Object.freeze({ outcome: 'refused' }),
  idle: Object.freeze({ outcome: 'idle' }),
};

/** `read` label sets of `pixiu_delivery_fetch_failures_total`, built once (as above). */
export const FETCH_READ_LABELS: Readonly<Record<FetchRead, { read: FetchRead }>> = {
  inbox: Object.freeze({ read: 'inbox' }),
  records: Object.freeze({ read: 'records' }),
};

/** `result` label sets of `pixiu_ack_cursor_writes_total`, built once (as above). */
export const WRITTEN = Object.freeze({ result: 'written' });
/** See {@link WRITTEN}. */
export const FAILED = Object.freeze({ result: 'failed' });

/** The `accepted` label set of `pixiu_ws_handshakes_total`, built once. */
export const ACCEPTED = Object.freeze({ outcome: 'accepted' });
