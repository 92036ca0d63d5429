/**
 * Client routes for devices without a socket (DESIGN.md §7): `GET /v1/me/messages`
 * and `POST /v1/me/ack`, authenticated with the user's JWT (`Authorization: Bearer`),
 * held to a request rate per user on this node ({@link ME_REQUEST_LIMIT}).
 */
import type {} from '@fastify/swagger';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { bearerToken } from '../auth/api-token.js';
import type { ClientClaims } from '../auth/jwt.js';
import { TokenExpiredError } from '../auth/jwt-refusals.js';
import { PixiuError } from '../errors.js';
import { quotedText } from '../text-cut.js';
import { pageHoldBytes, readHistory } from '../api/history.js';
import { historyPage, historyQuery } from '../api/routes/history.js';
import { HISTORY_SHARE_WORDS, PIPELINED_WORDS, answerObject, device, errorBody, errorResponses, noQuery, retryAfterHeader, seqCursor } from '../api/schemas.js';
import type { GatewayDeps } from './gateway-deps.js';
import { ME_REQUEST_LIMIT, UserRates, overRate, rateWords } from './user-rate.js';
import { clientFields } from '../api/client-ip.js';

/** The rate refusal, as the OpenAPI document words it: the limit's numbers, as the refusal's message gives them. */
const OVER_RATE_WORDS = `this user's requests to the /v1/me routes (both together) on this node are over their rate (${rateWords(ME_REQUEST_LIMIT)}, per user on each node); nothing done. Send it again after Retry-After (docs/api.md, "Client routes")`;

/** The 429 of `POST /v1/me/ack`, with `Retry-After`: over the rate. */
const ackRateLimitedAnswer = { ...errorBody, description: `RATE_LIMITED: ${OVER_RATE_WORDS}. Or ${PIPELINED_WORDS}`, headers: retryAfterHeader } as const;

/** The 429 of `GET /v1/me/messages`, with `Retry-After`: over the rate, or the user's share of the history budget held (the history routes' words). */
const pageRateLimitedAnswer = {
  ...errorBody,
  description: `RATE_LIMITED: ${OVER_RATE_WORDS}. Or ${HISTORY_SHARE_WORDS}. Or ${PIPELINED_WORDS}`,
  headers: retryAfterHeader,
} as const;

/**
 * The largest `POST /v1/me/ack` body, bytes: 4 KiB (an ack is under 300 bytes), or
 * `PIXIU_MAX_BODY_BYTES` when that is lower. Any client's token reaches this route: the
 * producers' limit (1 MiB by default, up to 256 MiB) would let one make the node parse
 * that much per request.
 */
export const ACK_BODY_BYTES = 4 * 1024;

/**
 * The refusal of a request carrying no Authorization token: it names `?token=` when
 * the request has one, since the query is read only on `/v1/connect` (a browser's
 * WebSocket can set no header; a fetch can).
 */
function missingTokenMessage(url: string): string {
  const query = url.indexOf('?');
  const inQuery = query >= 0 && new URLSearchParams(url.slice(query + 1)).has('token');
  return inQuery
    ? 'a token is required in the Authorization header (Bearer <jwt>, a user\'s JWT): ?token= is read only on /v1/connect'
    : 'a token is required: Authorization: Bearer <jwt> (a user\'s JWT)';
}

/**
 * Rethrows a refusal of the token in these routes' words: an expired one's 401 says to
 * mint a new token and send the request again, not (as at connect and in a `refresh`)
 * how an open WebSocket keeps its session — there is none here (a mobile tester's F5).
 */
function inHttpWords(err: unknown): never {
  throw err instanceof TokenExpiredError ? err.overHttp() : err;
}

/** Registers the `/v1/me/...` routes in their own scope (JWT, not the API token). */
export async function meRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  await app.register(async (me) => {
    const claimsOf = new WeakMap<FastifyRequest, ClientClaims>();
    const rates = new UserRates(ME_REQUEST_LIMIT);
    const user = (req: FastifyRequest): string => {
      const c = claimsOf.get(req);
      if (!c) throw new PixiuError('UNAUTHORIZED', 'a token is required');
      return c.user;
    };
    me.addHook('onRequest', async (req) => {
      const token = bearerToken(req.headers.authorization);
      if (token === undefined) throw new PixiuError('UNAUTHORIZED', missingTokenMessage(req.url));
      // A token not in JWT form (the API token, or a JWT re-encoded) is refused with its
      // hint by the verifier, as at connect and in a refresh (jwt-form.ts).
      const claims = await deps.verify(token, () => clientFields(req)).catch(inHttpWords);
      // Before the body is read and before any Redis call: one token flooding these
      // routes (~400 acks or ~530 pages a second) tripled producers' latency (a
      // hostile-client tester's finding, low).
      const retryAfter = rates.take(claims.user);
      if (retryAfter > 0) throw overRate('requests to /v1/me', ME_REQUEST_LIMIT, retryAfter);
      claimsOf.set(req, claims);
    });

    me.get<{ Querystring: { after_seq: number; limit: number } }>('/v1/me/messages', {
      schema: {
        summary: 'Read my inbox (user JWT)',
        operationId: 'getMyMessages',
        tags: ['client'],
        security: [{ userToken: [] }],
        querystring: historyQuery,
        response: { 200: historyPage, ...errorResponses, 429: pageRateLimitedAnswer },
      },
    }, async (req, reply) => readHistory(deps.inbox, deps.store, user(req), req.query.after_seq, req.query.limit,
      req.server.historyBudget.hold(reply, pageHoldBytes(req.query.limit, deps.config.maxMessageBytes), user(req))));

    me.post<{ Body: { device: string; seq: number; epoch?: string | null } }>('/v1/me/ack', {
      bodyLimit: Math.min(ACK_BODY_BYTES, deps.config.maxBodyBytes),
      schema: {
        summary: 'Acknowledge my messages up to a seq (user JWT)',
        operationId: 'ackMyMessages',
        description: 'Moves the device\'s ack cursor to seq; a cursor never moves back. A seq above the latest is refused; with epoch (the one GET /v1/me/messages gave), an inbox of another epoch now is a 409.',
        tags: ['client'],
        security: [{ userToken: [] }],
        querystring: noQuery,
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['device', 'seq'],
          properties: { device, seq: seqCursor, epoch: { type: ['string', 'null'], minLength: 1, maxLength: 64, description: 'the inbox epoch seq belongs to (GET /v1/me/messages); null, as that gives for a user with no inbox, is the same as none' } },
        },
        response: {
          200: answerObject({
            device: { type: 'string' },
            cursor: { type: 'integer', description: 'the highest seq the device acked; never moves back' },
          }, ['device', 'cursor'], 'The device\'s ack cursor now'),
          409: { ...errorBody, description: 'CONFLICT: epoch is not the inbox\'s epoch now (the inbox was recreated since that page was read), or the inbox got another epoch while the ack was under way; no cursor of the inbox\'s epoch moved. Read GET /v1/me/messages again' },
          413: { ...errorBody, description: `PAYLOAD_TOO_LARGE: the body is over ${ACK_BODY_BYTES} bytes (4 KiB), this route's own limit (PIXIU_MAX_BODY_BYTES when that is lower); nothing done` },
          ...errorResponses,
          429: ackRateLimitedAnswer,
        },
      },
    }, async (req) => {
      const uid = user(req);
      const { device: dev, seq, epoch: given } = req.body;
      const { epoch, latestSeq } = await deps.inbox.range(uid, Number.MAX_SAFE_INTEGER, 1);
      // The seq counts messages of the epoch it was read under: of another one it would skip new messages.
      // The text says no more than that: the epoch may be a client's garbage, or one given up
      // with nothing lost (a last_seq above the latest under it, docs/protocol.md case 2).
      // Quoted and escaped as text: a client's epoch with a lone surrogate echoed as is
      // made a body strict JSON decoders refuse (the fidelity walk's F2).
      if (given !== undefined && given !== null && given !== epoch) {
        throw new PixiuError('CONFLICT', `epoch ${quotedText(given, 64)} is not the inbox's (${epoch ?? 'none'}): read GET /v1/me/messages again`);
      }
      if (seq > latestSeq) throw new PixiuError('INVALID_REQUEST', `seq ${seq} is above the latest seq (${latestSeq})`);
      // Under the epoch just read. A rotation between that read and the ack (ack-7.lua
      // answers null) is a 409, an epoch given or not: the seq was read under the old
      // epoch, and taken under the new one it would skip that epoch's first messages with
      // no reset (the whole-change review's L1). It was answered 200 with the new epoch's
      // cursor: `cursor: 0` for a device at 73 under the epoch given (the chaos walk's F1).
      const cursor = await deps.inbox.ack(uid, dev, seq, epoch ?? undefined);
      if (cursor === null) throw new PixiuError('CONFLICT', `the inbox's epoch changed during the ack (it was ${epoch ?? 'none'}): read GET /v1/me/messages again`);
      return { device: dev, cursor };
    });
  });
}
