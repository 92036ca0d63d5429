/**
 * `POST /v1/broadcast {type, data, tags?: {all?, any?}, ttl?}` → `{id, bseq}`
 * (DESIGN.md §7, §8), behind the API token.
 */
import type {} from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { wordedPattern } from '../api/pattern-rules.js';
import { errorResponses, messageType, msgId, noQuery, ttlSeconds } from '../api/schemas.js';
import type { MessageStore } from '../store/message-store.js';
import type { BroadcastStream } from './broadcast-stream.js';
import { publishBroadcast, type BroadcastInput } from './broadcaster.js';
import { MAX_FILTER_TAGS } from './filter.js';

/** A tag: 1–64 characters, no whitespace or control characters. */
export const tagSchema = { type: 'string', pattern: wordedPattern('^[^\\s\\p{Cc}\\p{Cs}]{1,64}$', '1–64 characters, no whitespace or control characters') } as const;
const TAG = new RegExp(tagSchema.pattern, 'u');

/** True when `tag` is a valid broadcast tag ({@link tagSchema}): one a filter can name. */
export function isTag(tag: string): boolean {
  return TAG.test(tag);
}

const tagList = { type: 'array', minItems: 1, maxItems: MAX_FILTER_TAGS, items: tagSchema } as const;

/** Registers the broadcast route (call inside the API-token scope). */
export function broadcastRoutes(app: FastifyInstance, store: MessageStore, stream: BroadcastStream): void {
  app.post<{ Body: BroadcastInput }>('/v1/broadcast', {
    schema: {
      summary: 'Broadcast to every online connection, optionally filtered by JWT tags',
      operationId: 'sendBroadcast',
      description: `Live and at-most-once. tags.all: every tag present; tags.any: at least one (each list 1–${MAX_FILTER_TAGS} tags); no tags: everyone. Clients that reconnect with last_bseq get the retained broadcasts they missed.`,
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
        },
      },
      response: {
        201: {
          type: 'object',
          description: 'Stored and published to every node\'s connections',
          properties: { id: msgId, bseq: { type: 'string', description: 'its position in the broadcast stream (a client\'s last_bseq)' } },
          required: ['id', 'bseq'],
        },
        ...errorResponses,
      },
    },
  }, async (req, reply) => reply.code(201).send(await publishBroadcast(store, stream, req.body)));
}
