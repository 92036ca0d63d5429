/**
 * The error catalogue: every error Pixiu answers with, its stable code, its HTTP
 * status and, where one applies, the WebSocket close code (DESIGN.md §6, §7).
 *
 * Clients see `{"error": {"code", "message"}}` and never a stack trace. Code that
 * fails throws a {@link PixiuError} built from one entry here, so the mapping from a
 * failure to what the client sees lives in exactly one place.
 */
import { plainReason } from './redis/plain-reasons.js';

/** One catalogue entry. */
export interface ErrorSpec {
  /** Stable machine-readable code, e.g. `INVALID_REQUEST`. */
  readonly code: string;
  /** HTTP status answered for this error (DESIGN.md §7). */
  readonly status: number;
  /** WebSocket close code when the error ends a connection (DESIGN.md §6), if any. */
  readonly closeCode?: number;
  /** Whether a client may retry the same request later (503: with Retry-After). */
  readonly retryable: boolean;
}

/** The catalogue, keyed by code. A test checks its shape. */
export const ERRORS = Object.freeze({
  /** Malformed input: bad JSON, a schema violation, a malformed MsgID or user id. */
  INVALID_REQUEST: { code: 'INVALID_REQUEST', status: 400, closeCode: 4003, retryable: false },
  /** Missing, wrong or expired credentials. */
  UNAUTHORIZED: { code: 'UNAUTHORIZED', status: 401, closeCode: 4001, retryable: false },
  /** Valid credentials, but not allowed (e.g. an Origin not in the allowed list). */
  FORBIDDEN: { code: 'FORBIDDEN', status: 403, closeCode: 1008, retryable: false },
  /** The addressed thing does not exist (or has expired). */
  NOT_FOUND: { code: 'NOT_FOUND', status: 404, retryable: false },
  /** The request took longer than the server waits for its headers or body. */
  REQUEST_TIMEOUT: { code: 'REQUEST_TIMEOUT', status: 408, retryable: true },
  /** A body or an encoded message over its byte limit; a client frame over its cap. */
  PAYLOAD_TOO_LARGE: { code: 'PAYLOAD_TOO_LARGE', status: 413, closeCode: 1009, retryable: false },
  /** A `client_msg_id` sent again with another message than the one first stored under it. */
  CONFLICT: { code: 'CONFLICT', status: 409, retryable: false },
  /** An `Expect` header asking for something other than `100-continue` (RFC 9110 §10.1.1). */
  EXPECTATION_FAILED: { code: 'EXPECTATION_FAILED', status: 417, retryable: false },
  /** A request body in a media type other than `application/json`. */
  UNSUPPORTED_MEDIA_TYPE: { code: 'UNSUPPORTED_MEDIA_TYPE', status: 415, retryable: false },
  /** The request line and headers together are over Node's limit (16 KiB by default). */
  HEADERS_TOO_LARGE: { code: 'HEADERS_TOO_LARGE', status: 431, retryable: false },
  /** Over a rate or connection limit. */
  RATE_LIMITED: { code: 'RATE_LIMITED', status: 429, closeCode: 1008, retryable: true },
  /** A request in a transfer coding other than `chunked` (RFC 9112 §6.1: 501 for a transfer coding the server does not understand). */
  NOT_IMPLEMENTED: { code: 'NOT_IMPLEMENTED', status: 501, retryable: false },
  /** A dependency (Redis, the store) failed or timed out; retry later (Retry-After). */
  UNAVAILABLE: { code: 'UNAVAILABLE', status: 503, closeCode: 1011, retryable: true },
  /**
   * A fault of Pixiu's own; logged at error with its stack, never shown to the client.
   * Also a key of the wrong type in Redis (a recipient's inbox key, a room's, the
   * broadcast stream's, a channel's), whose message names the user, the room, the
   * broadcast stream or the channel (src/redis/wrong-type.ts): no retry cures it either.
   */
  INTERNAL: { code: 'INTERNAL', status: 500, closeCode: 1011, retryable: false },
} as const satisfies Record<string, ErrorSpec>);

/**
 * Seconds a client should wait before sending again a request answered 503
 * UNAVAILABLE, or 429 where the limit frees itself within moments (the history budget):
 * the answer's `Retry-After` (RFC 9110 §10.2.3; RFC 6585 §4 for a 429).
 */
export const RETRY_AFTER_SECONDS = 1;

/** A code from the catalogue. */
export type ErrorCode = keyof typeof ERRORS;

/**
 * An error with a catalogue code. `message` is safe to show a client: it names what
 * was wrong with their input or which dependency is unavailable, never internals.
 * `cause` keeps the underlying error for the logs.
 */
export class PixiuError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly closeCode: number | undefined;
  readonly retryable: boolean;
  /**
   * The `Retry-After` of its HTTP answer, seconds; none when undefined. Every 503
   * UNAVAILABLE has {@link RETRY_AFTER_SECONDS}; another error only when given (the
   * history budget's 429, and the per-user rates' and the `/metrics` scrape rate's with
   * their own wait, src/gateway/user-rate.ts, src/api/routes/health.ts: not the
   * connection limit's, which waits for a connection to close, docs/protocol.md).
   */
  readonly retryAfterSeconds: number | undefined;

  /**
   * @param code a catalogue code
   * @param message a client-safe sentence
   * @param options.cause the underlying error, for logs only
   * @param options.retryAfterSeconds its answer's `Retry-After`, seconds (a 503's is
   *   {@link RETRY_AFTER_SECONDS} when not given)
   */
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; retryAfterSeconds?: number }) {
    super(message, options);
    const spec: ErrorSpec = ERRORS[code];
    this.name = 'PixiuError';
    this.code = code;
    this.status = spec.status;
    this.closeCode = spec.closeCode;
    this.retryable = spec.retryable;
    this.retryAfterSeconds = options?.retryAfterSeconds ?? (code === 'UNAVAILABLE' ? RETRY_AFTER_SECONDS : undefined);
  }

  /** The JSON error body of DESIGN.md §7. */
  toBody(): { error: { code: ErrorCode; message: string } } {
    return { error: { code: this.code, message: this.message } };
  }
}

/** Shorthand: `new PixiuError('INVALID_REQUEST', message)`. */
export function invalid(message: string): PixiuError {
  return new PixiuError('INVALID_REQUEST', message);
}

/** Shorthand: `new PixiuError('UNAVAILABLE', message, {cause})`. */
export function unavailable(message: string, cause?: unknown): PixiuError {
  return new PixiuError('UNAVAILABLE', message, { cause });
}

/** True when `err` is a {@link PixiuError} with the given code. */
export function isPixiuError(err: unknown, code?: ErrorCode): err is PixiuError {
  return err instanceof PixiuError && (code === undefined || err.code === code);
}

/** Log fields of an expected outage: see {@link outageFields}. */
export interface OutageFields {
  /** The failure's message. */
  readonly reason: string;
  /** Its cause's message, when it has one that says something else. */
  readonly cause?: string;
  /** Its code, when it has a string one (`UNAVAILABLE`, `ECONNREFUSED`, …). */
  readonly code?: string;
}

/**
 * What to log of a failure that an outage explains (Redis or another node down,
 * expected and retried): its message, its cause's and its code, no stack, as the HTTP
 * API logs its 503s (src/api/error-handler.ts, docs/api.md "Errors"). A stack per
 * retry, every few seconds for the length of an outage, says nothing more. The Redis
 * client's own messages are given in plain words (src/redis/plain-reasons.ts).
 */
export function outageFields(err: unknown): OutageFields {
  const e = err as { message?: unknown; code?: unknown; cause?: { message?: unknown } } | null | undefined;
  const reason = plainReason(typeof e?.message === 'string' ? e.message : String(err));
  const cause = typeof e?.cause?.message === 'string' ? plainReason(e.cause.message) : undefined;
  return {
    reason,
    ...(typeof cause === 'string' && cause !== reason ? { cause } : {}),
    ...(typeof e?.code === 'string' ? { code: e.code } : {}),
  };
}

/**
 * A start-up failure: a bad configuration value, a store partition that cannot be
 * opened, a missing `redis-server`. The process prints `message` and exits non-zero;
 * it is never answered to a client.
 */
export class StartupError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StartupError';
  }
}
