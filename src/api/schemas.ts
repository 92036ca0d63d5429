/**
 * JSON schemas of the HTTP API's shared pieces (DESIGN.md §2, §7). Routes compose
 * them; the OpenAPI document is generated from them, so the rules are stated once.
 *
 * Rules decided here (documented in docs/api.md):
 * - user id (and room id): 1–128 Unicode code points, none of them whitespace, a
 *   control character (Cc) or a lone surrogate (Cs, which cannot be stored as UTF-8
 *   without being replaced, so two different ids would collide);
 * - `type`: 1–64 of `[A-Za-z0-9._:-]`;
 * - `client_msg_id`: 1–128 printable ASCII characters (0x20–0x7E);
 * - `ttl`: whole seconds, 1 s to 30 days;
 * - device: 1–64 of `[A-Za-z0-9._:-]`.
 *
 * Response schemas: fastify serializes an answer whose status has a schema with
 * fast-json-stringify, which drops the properties an object schema does not declare
 * and coerces values to the declared type (null to 0 for an integer). So a success
 * answer's schema declares every field its route writes, with `null` in the type where
 * it can be null, and content of any JSON value untyped ({@link anyJson}); its objects
 * are open ({@link answerObject}, the OpenAPI meaning of an object schema too), so a
 * field added to an answer later is not lost on the way.
 */
import type { SwaggerTransform } from '@fastify/swagger';
import { ERRORS, type ErrorCode } from '../errors.js';
import { MSG_ID_HEX_PATTERN } from '../ids/msg-id.js';
import { wordedPattern } from './pattern-rules.js';
import { PIPELINE_BOUNDS } from './pipeline-bounds.js';

/** The user-id rule in words, as errors say it (the API's and the CLI's). */
export const USER_ID_RULE = '1–128 characters, no whitespace, control characters or lone surrogates';

/** Pattern of a user or room id (Ajv compiles patterns with the `u` flag). */
export const USER_ID_PATTERN = wordedPattern('^[^\\s\\p{Cc}\\p{Cs}]{1,128}$', USER_ID_RULE);
const USER_ID_RE = new RegExp(USER_ID_PATTERN, 'u');

/** True when `id` follows the user-id rule ({@link USER_ID_PATTERN}): for ids that come from elsewhere than a validated body (a JWT `sub`, the command line). */
export function isUserId(id: string): boolean {
  return USER_ID_RE.test(id);
}

/**
 * Longest path parameter the router accepts (fastify's `maxParamLength`, default 100):
 * a user id of 128 code points, each up to 4 UTF-8 bytes written as `%XX`. Longer
 * parameters are refused by the router; shorter ones are checked by the schemas.
 */
export const MAX_PATH_PARAM_LENGTH = 128 * 4 * 3;

/** A user id. */
export const userId = {
  type: 'string',
  minLength: 1,
  pattern: USER_ID_PATTERN,
  // The OpenAPI document shows the pattern with its refused characters as ranges of
  // \uXXXX escapes (portable-patterns.ts); the server reads it as it is here, with the u flag.
  description: `${USER_ID_RULE}: whitespace is Unicode White_Space and U+FEFF. The pattern lists the refused characters as ranges `
    + '(U+0000–U+0020, U+007F–U+00A0, U+1680, U+2000–U+200A, U+2028, U+2029, U+202F, U+205F, U+3000, U+FEFF, the surrogates U+D800–U+DFFF) '
    + 'of \\uXXXX escapes, read per code point (JSON Schema 2020-12 §6.4: ECMA-262 with the u flag; without it a check counts UTF-16 units '
    + 'and refuses every character above U+FFFF, whose two halves are surrogates). RE2 (Go) has no \\u escape: docs/api.md, "Input rules"',
} as const;

/** The rule of a message type and of a device name, in words. */
const NAME_RULE = '1–64 characters, each one of A-Z a-z 0-9 . _ : -';

/** Pattern of a message type and of a device name. */
const NAME_PATTERN = wordedPattern('^[A-Za-z0-9._:-]{1,64}$', NAME_RULE);

/** The rule of a device name, in words (docs/api.md, "Input rules"). */
export const DEVICE_RULE = NAME_RULE;

const NAME_RE = new RegExp(NAME_PATTERN);

/** True when `name` follows the device-name rule ({@link DEVICE_RULE}): for a name given on the command line. */
export function isDeviceName(name: string): boolean {
  return NAME_RE.test(name);
}

/** A message type. */
export const messageType = {
  type: 'string',
  pattern: NAME_PATTERN,
  description: NAME_RULE,
} as const;

/** A producer's idempotency key. */
export const clientMsgId = {
  type: 'string',
  pattern: wordedPattern('^[\\x20-\\x7e]{1,128}$', '1–128 printable ASCII characters (space to ~)'),
  description: '1–128 printable ASCII characters, the idempotency key: the same key with the same content again returns the first result (duplicate: true); with other content it is 409 CONFLICT (what is compared: docs/api.md, Messages, Broadcast, Channels)',
} as const;


/** Message retention in seconds. */
export const ttlSeconds = {
  type: 'integer',
  minimum: 1,
  maximum: 30 * 86_400,
  description: 'retention in seconds, 1 to 2592000 (30 days); default 7 days',
} as const;

/** A device name. */
export const device = {
  type: 'string',
  pattern: NAME_PATTERN,
  description: NAME_RULE,
} as const;

/**
 * A MsgID in its 16-hex-digit form (DESIGN.md §2), in answers. The pattern here is the
 * shape only ({@link MSG_ID_HEX_PATTERN}): fast-json-stringify tests it on every id of
 * an `anyOf` answer (a batch's items), and the long whole rule made a 1000-item batch
 * answer 33–48 % slower to serialise for ids the server made itself. The OpenAPI
 * document publishes the whole rule in its place (portable-patterns.ts).
 */
export const msgId = {
  type: 'string',
  pattern: wordedPattern(MSG_ID_HEX_PATTERN, 'a message id: 16 lower-case hex digits'),
  description: '16 lower-case hex digits',
} as const;

/** A seq cursor: 0 means "before the first". */
export const seqCursor = {
  type: 'integer',
  minimum: 0,
  maximum: Number.MAX_SAFE_INTEGER,
} as const;

/**
 * What the error body's `code` is, for the document: the enum is this release's codes,
 * not a closed list. A generated client whose enum refuses a value it does not know
 * would fail on a code added later instead of reading the answer (docs/api.md "Errors").
 */
const CODE_DESCRIPTION = 'what went wrong: one of the codes of docs/api.md "Errors" as of this release. Later releases may add codes; '
  + 'a client treats a code it does not know by the answer\'s HTTP status (a generated client must not refuse an unknown value)';

/**
 * The JSON error body of DESIGN.md §7. Its `code` is one of the catalogue's, listed from
 * it (src/errors.ts), so the document and the code cannot disagree; docs/api.md's
 * "Errors" table lists the same (a test checks the three). The list may grow
 * ({@link CODE_DESCRIPTION}).
 */
export const errorBody = {
  type: 'object',
  properties: {
    error: {
      type: 'object',
      properties: {
        code: { type: 'string', enum: Object.keys(ERRORS) as ErrorCode[], description: CODE_DESCRIPTION },
        message: { type: 'string', description: 'what was wrong, in words for a person; not stable: match on code' },
      },
      required: ['code', 'message'],
    },
  },
  required: ['error'],
} as const;

/**
 * The `Retry-After` header of an answer, for a response schema's `headers`, which the
 * OpenAPI document shows (the serializer ignores them): sent with every 503
 * UNAVAILABLE, the history routes' 429, the `/v1/me` routes' per-user rate 429, the
 * `/metrics` scrape rate's 429 (error-handler.ts `sendError`) and the pipelining bound's 429 (error-handler.ts
 * `writeClosingAnswer`), so `required` (document-headers.ts lifts it to the document's
 * Header Object); a batch's 200 has it only when an item is 503.
 */
export const retryAfterHeader = {
  'Retry-After': { type: 'integer', minimum: 0, required: true, description: 'seconds to wait before sending it again: 1, or until a per-user rate allows it again (RFC 9110 §10.2.3); 0: at once' },
} as const;

/**
 * Why any request may be refused 429 for its connection's pipelining
 * (pipelining-bound.ts `pipelinedPastBound`), as the OpenAPI document words it: the
 * bound is the HTTP server's, before any route, so every route declares it ({@link
 * pipelinedAnswer}, and beside their own 429s; walk26 L2: a producer route's fell under
 * `4XX`, which declares no `Retry-After`).
 */
export const PIPELINED_WORDS = `pipelined behind ${PIPELINE_BOUNDS.maxRequests} requests in progress on its connection: it and those sent after it `
  + 'were not acted on, and the connection closes; send them again at once, on another connection (docs/api.md, "Errors")';

/** The pipelining bound's 429 RATE_LIMITED, with {@link retryAfterHeader}: {@link PIPELINED_WORDS}. */
export const pipelinedAnswer = { ...errorBody, description: `RATE_LIMITED: ${PIPELINED_WORDS}`, headers: retryAfterHeader } as const;

/**
 * A 503 UNAVAILABLE of a route, with {@link retryAfterHeader}.
 * @param description what it means there (the OpenAPI document shows it)
 */
export function unavailableAnswer<const D extends string>(description: D) {
  return { ...errorBody, description, headers: retryAfterHeader } as const;
}

/**
 * Why a history request is refused 429 when one user's share of the history budget is
 * held (src/api/history-budget.ts), as the OpenAPI document words it: on the history
 * routes, and on `GET /v1/me/messages` beside its rate (src/gateway/me-routes.ts).
 */
export const HISTORY_SHARE_WORDS = 'this user\'s history requests in flight on this node, each holding what its page could come to (limit=1: about 128 KiB) until its client has taken the answer, hold their share of the node\'s budget (8 MiB), however small the inbox; nothing read. Send them one at a time, reading each answer before asking for the next, or send it again after Retry-After (docs/api.md, "Messages", history)';

/** The 429 of the history routes, with {@link retryAfterHeader}: {@link HISTORY_SHARE_WORDS}. */
export const historyRateLimitedAnswer = {
  ...errorBody,
  description: `RATE_LIMITED: ${HISTORY_SHARE_WORDS}. Or ${PIPELINED_WORDS}`,
  headers: retryAfterHeader,
} as const;

/**
 * A 404 NOT_FOUND a route answers for what it names (not the unknown route every
 * path can meet, which the `4xx` tells), for its `response` schema.
 * @param when what is not there, in the document's words
 */
export function notFoundAnswer<const D extends string>(when: D) {
  return { ...errorBody, description: `NOT_FOUND: ${when}` } as const;
}

/** What every body route's 413 says of `PIXIU_MAX_BODY_BYTES` (docs/api.md, "Errors"). */
const BODY_OVER_LIMIT = 'the body is over PIXIU_MAX_BODY_BYTES (1 MiB by default), refused before it is parsed; nothing done';

/**
 * The 413 PAYLOAD_TOO_LARGE of a route that takes a body, for its `response` schema.
 * @param more what else it refuses as too large, after the body limit (a message over
 *   `PIXIU_MAX_MESSAGE_BYTES`); none when omitted
 */
export function tooLargeAnswer(more?: string) {
  return { ...errorBody, description: `PAYLOAD_TOO_LARGE: ${BODY_OVER_LIMIT}${more === undefined ? '' : `; or ${more}`}` } as const;
}

/** The 413 of a route whose body is one message or publication: the body limit, or its encoded size. */
export const messageTooLargeAnswer = tooLargeAnswer('the message is over PIXIU_MAX_MESSAGE_BYTES (64 KiB by default: the UTF-8 JSON of {type, from, data}; of {type, data} for a broadcast or publication), nothing stored');

/** The 409 of a route that takes a {@link clientMsgId}: the key was first used with other content. */
export const conflictAnswer = {
  ...errorBody,
  description: 'CONFLICT: the client_msg_id was first used with other content, or for a broadcast; nothing appended. A retry of that first message (its answer lost, its body rebuilt) was stored already, as the id the error names: to retry, send the very same body; a new client_msg_id is for a different message',
} as const;

/** {@link conflictAnswer} of `POST /v1/broadcast` (walk29 F11: the messages' text named "the other kind" and "a different message"). */
export const broadcastConflictAnswer = {
  ...errorBody,
  description: 'CONFLICT: the client_msg_id was first used with other content (type, data or tags), or for a message that is no broadcast; nothing published. A retry of that first broadcast (its answer lost, its body rebuilt) was stored already, as the id the error names: to retry, send the very same body; a new client_msg_id is for a different broadcast',
} as const;

/** {@link conflictAnswer} of `POST /v1/channels/{channel}/publish`: a key is one channel's, and of no other kind. */
export const publicationConflictAnswer = {
  ...errorBody,
  description: 'CONFLICT: the client_msg_id was first used on this channel with other content (type or data); nothing published. A retry of that first publication (its answer lost, its body rebuilt) was published already, as the id the error names: to retry, send the very same body; a new client_msg_id is for a different publication',
} as const;

/**
 * The error responses of a route, for its `response` schema: {@link errorBody} with
 * what each class of status means (the OpenAPI document shows the `description`), and
 * the headers its 401, 429 and 503 carry (error-handler.ts `sendError`), each declared
 * apart so that the classes `4xx` and `5xx` hold only answers whose headers are not
 * always sent (docs/api.md: `required: true` where it is always sent). For a route that
 * takes a credential: every route that answers errors in this shape does.
 */
export const errorResponses = {
  401: {
    ...errorBody,
    description: 'UNAUTHORIZED: no credential, or one refused (docs/api.md, "Authentication")',
    headers: {
      'WWW-Authenticate': {
        type: 'string',
        // Sent with every 401 (error-handler.ts `sendError`): lifted to the Header Object by document-headers.ts.
        required: true,
        description: 'Bearer when the request carried no token; Bearer error="invalid_token" when it carried one that was refused (RFC 6750 §3)',
      },
    },
  },
  429: pipelinedAnswer,
  '4xx': { ...errorBody, description: 'Refused: the code says why (INVALID_REQUEST, NOT_FOUND, HEADERS_TOO_LARGE, …; docs/api.md, "Errors"); a 401 and a 429 are declared apart, with the headers they always carry' },
  503: unavailableAnswer('UNAVAILABLE: Redis or the store failed or did not answer in time, or this node is shutting down. It may have been done all the same: send it again after Retry-After, with its client_msg_id where it takes one (docs/api.md, "Errors")'),
  '5xx': { ...errorBody, description: 'Not done: 500 INTERNAL (a bug), 501 NOT_IMPLEMENTED (a Transfer-Encoding other than chunked), or 503 as above' },
} as const;

/**
 * The error responses of an operations route (`/healthz`, `/readyz`, `/metrics`): no
 * credential, so no 401, but the refusals every request can meet (docs/api.md,
 * "Errors": a body on a GET, a fragment, a bad percent-encoding, headers over the
 * limit, …), the pipelining bound's 429 and the 503 of a node shutting down (a contract
 * tester found none declared).
 */
export const opsErrorResponses = {
  429: pipelinedAnswer,
  '4xx': { ...errorBody, description: 'Refused: the request is malformed (400 INVALID_REQUEST: a body, a fragment, a bad percent-encoding, not HTTP/1.1), or its line and headers are over the limit (431 HEADERS_TOO_LARGE), …; docs/api.md, "Errors"; a 429 is declared apart, with its Retry-After' },
  503: unavailableAnswer('UNAVAILABLE: this node is shutting down; ask another node (docs/api.md, "Operations", Shutdown)'),
  '5xx': errorResponses['5xx'],
} as const;

/**
 * The query schema of a route that takes no query parameters: any parameter is
 * refused (400 INVALID_REQUEST naming it), as the routes that take some refuse
 * unknown ones, so a typo is never silently ignored (docs/api.md, "Input rules").
 */
export const noQuery = { type: 'object', additionalProperties: false, properties: {} } as const;

/**
 * An object of a success answer, for a `response` schema: open (`additionalProperties:
 * true`, see the module comment), so nothing the route writes is dropped.
 * @param properties every field the route writes, in the order it writes them
 * @param required the fields it always writes; fast-json-stringify writes these first,
 *   and answers 500 when one is missing, so only fields that are never `undefined`
 * @param description what the answer means (the OpenAPI document shows it)
 */
export function answerObject<const P extends Record<string, object>>(
  properties: P, required: readonly (keyof P & string)[], description?: string,
) {
  return { type: 'object', ...(description !== undefined ? { description } : {}), additionalProperties: true, properties, required } as const;
}

/**
 * `schema`, the answer of a route that says a repeat by its status (201 created, 200 a
 * `client_msg_id` already done), with its `duplicate` field fixed to what that status
 * means: an enum of the one value, as a JSON Schema `const` would say it, for a client
 * generator (a contract tester's finding: it was a plain boolean on both). Not `const`:
 * fast-json-stringify writes a `const` schema's value whatever the answer holds, which
 * would hide a route that answered the wrong status.
 * @param schema an object schema with a boolean `duplicate` property
 * @param duplicate its value under this status
 * @param description what that value says, in place of the property's own description
 *   (which may tell the other status's case: a pyclient tester's F8)
 */
export function withDuplicate<const S extends { properties: { duplicate: object } }>(schema: S, duplicate: boolean, description?: string) {
  const property = { ...schema.properties.duplicate, enum: [duplicate], ...(description === undefined ? {} : { description }) };
  return { ...schema, properties: { ...schema.properties, duplicate: property } } as const;
}

/**
 * Content that is any JSON value (a message's `data`), in a response schema. No `type`:
 * fastify's serializer (fast-json-stringify) writes such a value with JSON.stringify,
 * exactly as stored; a `type` would coerce it, and an object schema would drop keys.
 */
export const anyJson = { description: 'any JSON value: the same value as was sent, not the same text (numbers rewritten, index-like keys first; docs/api.md "Input rules")' } as const;

/**
 * A route's `config.swaggerTransform` (@fastify/swagger): the OpenAPI document shows
 * `shown` in place of the route's own request schemas. For a rule the route checks in
 * code, in its own words (docs/api.md; exactly one of `to` and `room`, a message id),
 * which the route's schema would refuse first, in Ajv's: a client generator reads the
 * rule in the document, and the runtime's answers do not change.
 * @param shown the request schemas the document shows: `body`, `params`
 */
export function documentedAs(shown: { body?: object; params?: object }): SwaggerTransform {
  return ({ schema, url }) => ({ schema: { ...schema, ...shown }, url });
}
