/**
 * `POST /v1/channels/{channel}/publish {type, data, client_msg_id?}` → `{id, duplicate}`
 * (DESIGN.md §7, §8), behind the API token. Live, at-most-once: subscribers connected
 * now get a `pub` frame; a short history lets `sub` with `since` catch up. A
 * publication is held to the message size limit (DESIGN.md §10) like a stored
 * message: every subscriber gets it and the history keeps up to `channelHistory` of
 * them. With a `client_msg_id` a producer's retry publishes it once per channel
 * (channel-stream.ts `publishOnce`): 200 with `duplicate: true`, or 409 for other content.
 */
import type {} from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import type { Metrics } from '../api/metrics.js';
import { clientMsgId, publicationConflictAnswer, errorResponses, messageTooLargeAnswer, messageType, noQuery, withDuplicate } from '../api/schemas.js';
import { PixiuError } from '../errors.js';
import { retryAdvice } from '../ingest/same-message.js';
import { publicationDataJson } from '../store/record.js';
import type { ChannelStream } from './channel-stream.js';
import { CHANNEL_PATTERN, MAX_CHANNEL_LENGTH } from './patterns.js';
import { publicationFingerprint } from './publication-fingerprint.js';

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

/** The answer to a published (or repeated) publication. */
const publicationResult = {
  type: 'object',
  properties: {
    id: { type: 'string', description: 'its id in the channel\'s history (a subscriber\'s since)' },
    duplicate: { type: 'boolean', description: 'true when the same client_msg_id was published to this channel before: nothing published again' },
  },
  required: ['id', 'duplicate'],
} as const;

/** The body of a publication. */
interface PublicationBody {
  readonly type: string;
  readonly data: unknown;
  readonly client_msg_id?: string;
}

/**
 * Registers the channel route (call inside the API-token scope). Counted in
 * `pixiu_ingest_messages_total{route="channel"}` (a refusal by the error handler) and
 * timed, when published or found published, in `pixiu_ingest_duration_seconds`.
 */
export function channelRoutes(app: FastifyInstance, stream: ChannelStream, opts: ChannelRouteOptions, metrics: Metrics): void {
  app.post<{ Params: { channel: string }; Body: PublicationBody }>('/v1/channels/:channel/publish', {
    config: { ingestRoute: 'channel' },
    schema: {
      summary: 'Publish to a channel\'s live subscribers',
      operationId: 'publishToChannel',
      description: 'Live and at-most-once; kept in the channel\'s short history for sub with since. The JSON of {type, data} is at most 64 KiB by default (413 over it). With client_msg_id a retry publishes it once per channel: 200 with duplicate: true when it was published before; 409 when the key was used on this channel with another type or data.',
      tags: ['channels'],
      params: { type: 'object', properties: { channel: channelSchema }, required: ['channel'] },
      querystring: noQuery,
      body: {
        type: 'object',
        additionalProperties: false,
        required: ['type', 'data'],
        properties: { type: messageType, data: { description: 'any JSON value' }, client_msg_id: clientMsgId },
      },
      response: {
        200: { ...withDuplicate(publicationResult, true), description: 'A duplicate: the same client_msg_id was published to this channel before; its id, nothing published again' },
        201: { ...withDuplicate(publicationResult, false, 'false: published now (its client_msg_id, if any, not used on this channel before)'), description: 'Published (also when nobody is subscribed)' },
        409: publicationConflictAnswer,
        413: messageTooLargeAnswer,
        ...errorResponses,
      },
    },
  }, async (req, reply) => {
    const started = performance.now();
    const { channel } = req.params;
    const { type, client_msg_id: cid } = req.body;
    // Checked and measured as a stored message's content is (no `from` here).
    const dataJson = publicationDataJson(type, req.body.data, opts.maxMessageBytes);
    const published = cid === undefined
      ? { id: await stream.publish(channel, type, Date.now(), dataJson), before: false }
      : await publishOnce(stream, channel, type, dataJson, cid);
    metrics.ingested('channel', published.before, started);
    return reply.code(published.before ? 200 : 201).send({ id: published.id, duplicate: published.before });
  });
}

/**
 * Publishes with a `client_msg_id`, once per channel (channel-stream.ts `publishOnce`).
 * @returns its id, and `before` when it was published before (nothing published now)
 * @throws PixiuError CONFLICT when the key was used on this channel for other content
 */
async function publishOnce(stream: ChannelStream, channel: string, type: string, dataJson: string, cid: string): Promise<{ id: string; before: boolean }> {
  const fingerprint = publicationFingerprint(type, dataJson);
  const published = await stream.publishOnce(channel, type, Date.now(), dataJson, cid, fingerprint);
  if (published.before && published.fingerprint !== fingerprint) {
    throw new PixiuError('CONFLICT', `client_msg_id ${JSON.stringify(cid)} was first used on channel ${channel} for another publication `
      + `(${published.id}: its type or data differ); nothing was published. ${retryAdvice('publication', published.id, 'published')}`);
  }
  return published;
}
