/**
 * `POST /v1/channels/{channel}/publish {type, data}` → `{id}` (DESIGN.md §7, §8),
 * behind the API token. Live, at-most-once: subscribers connected now get a `pub`
 * frame; a short history lets `sub` with `since` catch up. A publication is held to
 * the message size limit (DESIGN.md §10) like a stored message: every subscriber
 * gets it and the history keeps up to `channelHistory` of them.
 */
import type {} from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { errorResponses, messageType, noQuery } from '../api/schemas.js';
import { publicationDataJson } from '../store/record.js';
import type { ChannelStream } from './channel-stream.js';
import { CHANNEL_PATTERN, MAX_CHANNEL_LENGTH } from './patterns.js';

/** A channel name in a path. */
export const channelSchema = {
  type: 'string',
  maxLength: MAX_CHANNEL_LENGTH,
  pattern: CHANNEL_PATTERN,
  description: `1–${MAX_CHANNEL_LENGTH} of A-Z a-z 0-9 _ : - in segments separated by .`,
} as const;

/** What the channel route needs besides the stream. */
export interface ChannelRouteOptions {
  /** Largest publication: UTF-8 bytes of the JSON of `{type, data}` (setting `maxMessageBytes`). */
  readonly maxMessageBytes: number;
}

/** Registers the channel route (call inside the API-token scope). */
export function channelRoutes(app: FastifyInstance, stream: ChannelStream, opts: ChannelRouteOptions): void {
  app.post<{ Params: { channel: string }; Body: { type: string; data: unknown } }>('/v1/channels/:channel/publish', {
    schema: {
      summary: 'Publish to a channel\'s live subscribers',
      operationId: 'publishToChannel',
      description: 'Live and at-most-once; kept in the channel\'s short history for sub with since. The JSON of {type, data} is at most 64 KiB by default (413 over it).',
      tags: ['channels'],
      params: { type: 'object', properties: { channel: channelSchema }, required: ['channel'] },
      querystring: noQuery,
      body: {
        type: 'object',
        additionalProperties: false,
        required: ['type', 'data'],
        properties: { type: messageType, data: { description: 'any JSON value' } },
      },
      response: {
        201: {
          type: 'object',
          description: 'Published (also when nobody is subscribed)',
          properties: { id: { type: 'string', description: 'its id in the channel\'s history (a subscriber\'s since)' } },
          required: ['id'],
        },
        ...errorResponses,
      },
    },
  }, async (req, reply) => {
    // Checked and measured as a stored message's content is (no `from` here).
    const dataJson = publicationDataJson(req.body.type, req.body.data, opts.maxMessageBytes);
    const id = await stream.publish(req.params.channel, req.body.type, Date.now(), dataJson);
    return reply.code(201).send({ id });
  });
}
