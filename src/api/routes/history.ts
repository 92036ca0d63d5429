/**
 * `GET /v1/users/{uid}/messages?after_seq&limit` (DESIGN.md §7): one user's inbox with
 * content, for producers and admins. A user who never received anything has an empty
 * inbox (epoch null), not a 404: Pixiu has no user registry.
 */
// Adds the OpenAPI fields (summary, tags) to route schema types.
import type {} from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import type { ApiDeps } from '../deps.js';
import { readHistory } from '../history.js';
import { errorBody, seqCursor, userId } from '../schemas.js';

/** Most messages one history page returns. */
export const MAX_HISTORY_LIMIT = 1000;
/** Messages per page when `limit` is not given. */
export const DEFAULT_HISTORY_LIMIT = 100;

/** Query of the history routes. */
export const historyQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    after_seq: { ...seqCursor, default: 0, description: 'return messages with a larger seq; 0 for the oldest retained' },
    limit: { type: 'integer', minimum: 1, maximum: MAX_HISTORY_LIMIT, default: DEFAULT_HISTORY_LIMIT },
  },
} as const;

/** Registers the producer-side history route. */
export function historyRoutes(app: FastifyInstance, deps: ApiDeps): void {
  app.get<{ Params: { uid: string }; Querystring: { after_seq: number; limit: number } }>('/v1/users/:uid/messages', {
    schema: {
      summary: 'Read a user\'s inbox',
      description: 'Messages after after_seq, oldest first, each with its seq. Seqs that were trimmed or whose content expired are listed in gaps.',
      tags: ['messages'],
      params: { type: 'object', properties: { uid: userId }, required: ['uid'] },
      querystring: historyQuery,
      response: { '4xx': errorBody, '5xx': errorBody },
    },
  }, async (req) => readHistory(deps.inbox, deps.store, req.params.uid, req.query.after_seq, req.query.limit));
}
