/**
 * `POST /v1/channels/{channel}/publish {type, data}` → `{id}` (DESIGN.md §7, §8),
 * behind the API token. Live, at-most-once: subscribers connected now get a `pub`
 * frame; a short history lets `sub` with `since` catch up.
 */
import type {} from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { errorBody, messageType } from '../api/schemas.js';
import type { ChannelStream } from './channel-stream.js';
import { CHANNEL_PATTERN, MAX_CHANNEL_LENGTH } from './patterns.js';

/** A channel name in a path. */
export const channelSchema = {
  type: 'string',
  maxLength: MAX_CHANNEL_LENGTH,
  pattern: CHANNEL_PATTERN,
  description: `1–${MAX_CHANNEL_LENGTH} of A-Z a-z 0-9 _ : - in segments separated by .`,
} as const;

/** Registers the channel route (call inside the API-token scope). */
export function channelRoutes(app: FastifyInstance, stream: ChannelStream): void {
  app.post<{ Params: { channel: string }; Body: { type: string; data: unknown } }>('/v1/channels/:channel/publish', {
    schema: {
      summary: 'Publish to a channel\'s live subscribers',
      tags: ['channels'],
      params: { type: 'object', properties: { channel: channelSchema }, required: ['channel'] },
      body: {
        type: 'object',
        additionalProperties: false,
        required: ['type', 'data'],
        properties: { type: messageType, data: { description: 'any JSON value' } },
      },
      response: {
        201: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
        '4xx': errorBody,
        '5xx': errorBody,
      },
    },
  }, async (req, reply) => {
    const id = await stream.publish(req.params.channel, req.body.type, Date.now(), JSON.stringify(req.body.data));
    return reply.code(201).send({ id });
  });
}
