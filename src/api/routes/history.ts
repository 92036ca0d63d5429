/**
 * `GET /v1/users/{uid}/messages?after_seq&limit` (DESIGN.md §7): one user's inbox with
 * content, for producers and admins. A user who never received anything has an empty
 * inbox (epoch null), not a 404: Pixiu has no user registry.
 */
// Adds the OpenAPI fields (summary, tags) to route schema types.
import type {} from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import type { ApiDeps } from '../deps.js';
import { GAP_REASONS } from '../../delivery/message-view.js';
import { pageHoldBytes, readHistory } from '../history.js';
import { answerObject, anyJson, errorResponses, historyRateLimitedAnswer, msgId, seqCursor, userId } from '../schemas.js';

/** Most inbox entries one history page reads (its `limit`). */
export const MAX_HISTORY_LIMIT = 1000;
/** Inbox entries a page reads when `limit` is not given. */
export const DEFAULT_HISTORY_LIMIT = 100;

/**
 * What `limit` counts, as docs/api.md says it: inbox entries read, not messages
 * returned. An entry whose content expired is read and comes as a gap, so a page may
 * hold no message with more after it; a client generated from the OpenAPI document
 * must not stop on an empty page (an integrator newcomer's finding: the text said "most
 * messages in the page").
 */
/** How the history routes' integer parameters are written (docs/api.md: the strict integer forms). */
const INTEGER_FORM = '. Plain decimal digits, given once: 007, 1e3, +1 or a second after_seq or limit are refused 400';
const LIMIT_WORDS = 'most inbox entries the page reads (after after_seq), not messages returned: an entry whose content expired or is unreadable comes in gaps, so a page may hold fewer messages than limit, or none, with more after it; it also ends before the message that would take its data past 1 MiB of JSON text. Read on from next_after_seq while it is below latest_seq: an empty messages array is not the end; with after_seq above latest_seq, or an epoch other than the pages before, read again from after_seq=0' + INTEGER_FORM;

/** Query of the history routes. */
export const historyQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    after_seq: { ...seqCursor, default: 0, description: `return messages with a larger seq; 0 for the oldest retained${INTEGER_FORM}` },
    limit: { type: 'integer', minimum: 1, maximum: MAX_HISTORY_LIMIT, default: DEFAULT_HISTORY_LIMIT, description: LIMIT_WORDS },
  },
} as const;

/**
 * One message of a history page: the WebSocket `msg` frame's fields
 * (src/delivery/message-view.ts), in the order that module writes them.
 */
const messageView = answerObject({
  seq: { type: 'integer', description: 'its position in the user\'s inbox' },
  id: msgId,
  type: { type: 'string' },
  ts: { type: 'integer', description: 'when it was accepted, ms since the epoch' },
  data: anyJson,
  from: { type: 'string', description: 'absent when the producer gave none' },
  room: { type: 'string', description: 'for a room message' },
}, ['seq', 'id', 'type', 'ts', 'data']);

/** The answer of the history routes: one page of an inbox (src/api/history.ts). */
export const historyPage = answerObject({
  user: userId,
  epoch: { type: ['string', 'null'], description: 'the inbox epoch; null when the user never received anything' },
  first_seq: { type: 'integer', description: 'the oldest seq the inbox still holds' },
  latest_seq: { type: 'integer' },
  messages: { type: 'array', items: messageView },
  gaps: {
    type: 'array',
    description: 'runs of seqs after after_seq that cannot be read, in seq order, each of one reason (adjacent runs of different reasons are separate items). Treat them as consumed, as a WebSocket gap',
    items: answerObject({
      from: { type: 'integer', description: 'inclusive' },
      to: { type: 'integer', description: 'inclusive' },
      reason: {
        type: 'string',
        enum: [...GAP_REASONS],
        description: 'trimmed: the inbox no longer holds them (the inbox cap, or deleted by hand); expired: their content is gone from the store (its ttl passed); undeliverable: the content is there but cannot be sent, or the inbox entry names no message (written by something other than Pixiu)',
      },
    }, ['from', 'to', 'reason']),
  },
  next_after_seq: { type: 'integer', description: 'after_seq of the next page; latest_seq at the end, or after_seq itself when that is above latest_seq (the inbox was lost or restored with less: read from after_seq=0 again)' },
}, ['user', 'epoch', 'first_seq', 'latest_seq', 'messages', 'gaps', 'next_after_seq'],
'One page of the inbox, oldest first; seqs that cannot be read are in gaps');

/** Registers the producer-side history route. */
export function historyRoutes(app: FastifyInstance, deps: ApiDeps): void {
  app.get<{ Params: { uid: string }; Querystring: { after_seq: number; limit: number } }>('/v1/users/:uid/messages', {
    schema: {
      summary: 'Read a user\'s inbox',
      operationId: 'getUserMessages',
      description: 'Messages after after_seq, oldest first, each with its seq. Seqs that were trimmed, whose content expired or that cannot be sent are listed in gaps, each run with its reason. A page reads up to limit inbox entries (expired ones come as gaps, so it may hold fewer messages, or none) and ends before 1 MiB of data; read on from next_after_seq while it is below latest_seq, even past an empty page; when after_seq is above latest_seq, or the epoch is not that of the pages before, read again from after_seq=0.',
      tags: ['messages'],
      params: { type: 'object', properties: { uid: userId }, required: ['uid'] },
      querystring: historyQuery,
      response: { 200: historyPage, ...errorResponses, 429: historyRateLimitedAnswer },
    },
  }, async (req, reply) => readHistory(deps.inbox, deps.store, req.params.uid, req.query.after_seq, req.query.limit,
    req.server.historyBudget.hold(reply, pageHoldBytes(req.query.limit, deps.config.maxMessageBytes), req.params.uid)));
}
