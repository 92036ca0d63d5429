/**
 * `POST /v1/broadcast {type, data, tags?: {all?, any?}, ttl?, client_msg_id?}` →
 * `{id, bseq, duplicate}` (DESIGN.md §7, §8), behind the API token: 201 when
 * published, 200 when the same `client_msg_id` was published before (broadcaster.ts).
 */
import type {} from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { clientGoneOf, dropAbandoned } from '../api/abandoned-requests.js';
import type { Metrics } from '../api/metrics.js';
import { RequestAbandoned } from '../ingest/abandoned.js';
import type { StoredIds } from '../ingest/shapes.js';
import { noteStored } from '../api/request-log.js';
import { clientMsgId, broadcastConflictAnswer, errorResponses, messageTooLargeAnswer, messageType, msgId, noQuery, ttlSeconds, withDuplicate } from '../api/schemas.js';
import { publishBroadcast, type BroadcasterDeps, type BroadcastInput, type BroadcastResult } from './broadcaster.js';
import { MAX_FILTER_TAGS, tagSchema } from './filter.js';

const tagList = { type: 'array', minItems: 1, maxItems: MAX_FILTER_TAGS, items: tagSchema } as const;

/** The answer to a published (or repeated) broadcast. */
const broadcastResult = {
  type: 'object',
  properties: {
    id: msgId,
    bseq: { type: 'string', description: 'its position in the broadcast stream (a client\'s last_bseq)' },
    duplicate: { type: 'boolean', description: 'true when the same client_msg_id was published before: nothing appended again' },
  },
  required: ['id', 'bseq', 'duplicate'],
} as const;

/**
 * Registers the broadcast route (call inside the API-token scope). Counted in
 * `pixiu_ingest_messages_total{route="broadcast"}` (a refusal by the error handler) and
 * timed, when published or found published, in `pixiu_ingest_duration_seconds`. One whose
 * client left before it was stored is neither stored nor answered (`abandoned`:
 * src/ingest/abandoned.ts).
 */
export function broadcastRoutes(app: FastifyInstance, deps: BroadcasterDeps, metrics: Metrics): void {
  app.post<{ Body: BroadcastInput }>('/v1/broadcast', {
    config: { ingestRoute: 'broadcast' },
    schema: {
      summary: 'Broadcast to every online connection, optionally filtered by JWT tags',
      operationId: 'sendBroadcast',
      description: `Live and at-most-once per connection. tags.all: every tag present; tags.any: at least one (each list 1–${MAX_FILTER_TAGS} tags); no tags: everyone. Clients that reconnect with last_bseq get the retained broadcasts they missed. With client_msg_id a retry publishes it once: 200 with duplicate: true when it was published before; 409 when the key names another message (not a broadcast, or other type, data or tags).`,
      tags: ['broadcast'],
      querystring: noQuery,
      body: {
        type: 'object',
        additionalProperties: false,
        required: ['type', 'data'],
        properties: {
          type: messageType,
          data: { description: 'any JSON value' },
          tags: { type: 'object', additionalProperties: false, properties: { all: tagList, any: tagList } },
          ttl: ttlSeconds,
          client_msg_id: clientMsgId,
        },
      },
      response: {
        200: { ...withDuplicate(broadcastResult, true), description: 'A duplicate: the same client_msg_id was published before; the same id and bseq, nothing appended again' },
        201: { ...withDuplicate(broadcastResult, false, 'false: stored and published now (its client_msg_id, if any, not used before)'), description: 'Stored and published to every node\'s connections' },
        409: broadcastConflictAnswer,
        413: messageTooLargeAnswer,
        ...errorResponses,
      },
    },
  }, async (req, reply) => {
    const started = performance.now();
    let result: BroadcastResult;
    // Its MsgID once stored, for the line of a failure after that (request-log.ts).
    const storedIds: StoredIds = [];
    try {
      result = await publishBroadcast(deps, req.body, clientGoneOf(req), storedIds);
    } catch (err) {
      if (!(err instanceof RequestAbandoned)) {
        noteStored(req, storedIds[0]);
        throw err;
      }
      metrics.countIngest('broadcast', 'abandoned');
      return dropAbandoned(req, reply, 'broadcast');
    }
    metrics.ingested('broadcast', result.duplicate, started);
    return reply.code(result.duplicate ? 200 : 201).send(result);
  });
}
