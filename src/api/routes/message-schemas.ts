/**
 * The JSON schemas of the message routes (messages.ts, DESIGN.md §7): the bodies of
 * `POST /v1/messages` and `POST /v1/messages/batch` as validated and as the OpenAPI
 * document shows them, and the answers of those and of `GET /v1/messages/{id}`.
 */
// Adds the OpenAPI fields (summary, tags) to route schema types.
import type {} from '@fastify/swagger';
import { answerObject, anyJson, clientMsgId, errorBody, messageType, msgId, retryAfterHeader, ttlSeconds, userId, withDuplicate } from '../schemas.js';

/** Most recipients of one message, and most messages in one batch (DESIGN.md §7). */
export const MAX_RECIPIENTS = 1000;
export const MAX_BATCH = 1000;

/** The body of `POST /v1/messages`: `to` (user messages) or `room` (rooms). */
export const messageBody = {
  type: 'object',
  additionalProperties: false,
  required: ['type', 'data'],
  properties: {
    to: {
      type: ['string', 'array'],
      description: `a user id, or a list of 1–${MAX_RECIPIENTS} user ids (repeats are delivered once)`,
      minLength: 1,
      pattern: userId.pattern,
      minItems: 1,
      maxItems: MAX_RECIPIENTS,
      items: userId,
    },
    room: { ...userId, description: 'a room id (instead of to)' },
    from: { ...userId, description: 'the sender, shown to recipients' },
    type: messageType,
    data: { description: 'any JSON value; the JSON of {type, from, data} is at most 64 KiB by default' },
    client_msg_id: clientMsgId,
    ttl: ttlSeconds,
  },
} as const;

/** The fields of a message but its address (`to`, `room`). */
const { to: _to, room: _room, ...messageFields } = messageBody.properties;

/**
 * One form of {@link documentedMessageBody}: a whole, closed message object addressed by
 * `address` (`to` or `room`), which it requires with `type` and `data`.
 */
function addressedBy(address: 'to' | 'room', title: string, description: string) {
  return {
    title,
    description,
    type: 'object',
    additionalProperties: false,
    required: [address, 'type', 'data'],
    properties: { [address]: messageBody.properties[address], ...messageFields },
  } as const;
}

/**
 * {@link messageBody} as the OpenAPI document shows it: with "exactly one of `to` and
 * `room`", which the routes check in code (messages.ts `checkAddressing`), in their own
 * words, after the schema (docs/api.md, "Messages"). Said as a `oneOf` of two whole
 * objects, each closed (`additionalProperties: false`) with its own `required`, so a
 * client generator reads it as a union `{to, …} | {room, …}`: the first form, a `oneOf`
 * of `required`-only branches beside the properties, gave openapi-typescript a body
 * that type-checked with neither, and openapi-zod-client a validator that took
 * anything (a contract tester's F3). A JSON Schema validator gives both forms the same
 * verdicts (test/api/openapi.test.ts compares them on generated bodies).
 */
export const documentedMessageBody = {
  description: 'a message to users (to) or to a room (room): exactly one of the two',
  oneOf: [
    addressedBy('to', 'MessageToUsers', 'to users: to, and no room'),
    addressedBy('room', 'MessageToRoom', 'to a room: room, and no to'),
  ],
} as const;

/**
 * The body of `POST /v1/messages/batch`. No item schema: each item is validated alone
 * (messages.ts `checkItem`), so a malformed one (even a non-object) fails by itself instead of
 * failing the whole batch; the document shows each item as {@link documentedMessageBody}.
 */
export const batchBody = {
  type: 'object',
  additionalProperties: false,
  required: ['messages'],
  properties: {
    messages: { type: 'array', minItems: 1, maxItems: MAX_BATCH, items: { description: 'a message as POST /v1/messages takes it' } },
  },
} as const;

const recipientsSchema = {
  type: 'array',
  items: {
    type: 'object',
    properties: { user: userId, seq: { type: 'integer' } },
    required: ['user', 'seq'],
  },
} as const;

/** The answer to a created (or repeated) message. */
export const ingestResult = {
  type: 'object',
  properties: {
    id: msgId,
    recipients: recipientsSchema,
    duplicate: { type: 'boolean' },
  },
  required: ['id', 'recipients', 'duplicate'],
} as const;

/** The answer to a room message. */
export const roomIngestResult = {
  type: 'object',
  properties: {
    id: msgId,
    room: { type: 'string' },
    recipients: { type: 'integer', description: 'members whose inbox got it' },
    duplicate: { type: 'boolean' },
  },
  required: ['id', 'room', 'recipients', 'duplicate'],
} as const;

/** The answer of `POST /v1/messages` under one status: `duplicate` is true under 200, false under 201. */
export function ingestAnswer(duplicate: boolean, description: string) {
  return { anyOf: [withDuplicate(ingestResult, duplicate), withDuplicate(roomIngestResult, duplicate)], description } as const;
}

/**
 * A batch item that was done, sent to users or to a room (`result`, the single message's
 * answer), under its status: 201 with `duplicate` false, 200 with true — an enum of one
 * value each, as {@link ingestAnswer} ties them (walk26's nit: `{"status": 201,
 * "duplicate": true}` validated).
 */
function doneItem<const R extends { properties: { duplicate: object }; required: readonly (keyof R['properties'] & string)[] }>(result: R, duplicate: boolean, description: string) {
  const status = { type: 'integer', enum: [duplicate ? 200 : 201] } as const;
  const properties: Record<string, object> = { status, ...withDuplicate(result, duplicate).properties };
  return answerObject(properties, ['status', ...result.required], description);
}

/** One result of `POST /v1/messages/batch`: an item's status beside its answer or its error. */
const batchItemResult = {
  anyOf: [
    doneItem(ingestResult, false, 'to users, created'),
    doneItem(ingestResult, true, 'to users, a duplicate'),
    doneItem(roomIngestResult, false, 'to a room, created'),
    doneItem(roomIngestResult, true, 'to a room, a duplicate'),
    answerObject({ status: { type: 'integer', minimum: 400, maximum: 599, description: 'its HTTP status, 4xx or 5xx' }, error: errorBody.properties.error }, ['status', 'error'], 'an item that failed alone'),
  ],
} as const;

/** The answer to `POST /v1/messages/batch`; `Retry-After` when an item is 503. */
export const batchResult = {
  ...answerObject({ results: { type: 'array', items: batchItemResult } }, ['results'], 'One result per item, in order; check each status'),
  headers: { 'Retry-After': { ...retryAfterHeader['Retry-After'], required: false, description: 'when an item is 503: seconds to wait before sending those items again, 1 (RFC 9110 §10.2.3)' } },
} as const;

/** The answer to `GET /v1/messages/{id}`: the stored record and where it was delivered. */
export const messageRecord = answerObject({
  id: msgId,
  kind: { type: 'string', enum: ['user', 'room', 'broadcast', 'channel'] },
  type: { type: 'string' },
  from: { type: 'string', description: 'absent when the producer gave none' },
  room: { type: 'string', description: 'for a room message' },
  ts: { type: 'integer', description: 'when it was accepted, ms since the epoch' },
  expires_at: { type: 'integer', description: 'when it expires, ms since the epoch' },
  client_msg_id: { type: 'string', description: 'absent when the producer gave none' },
  data: anyJson,
  recipients: {
    type: 'array',
    items: answerObject({
      user: userId,
      seq: { type: ['integer', 'null'], description: 'its seq in the user\'s inbox; null once no longer there (trimmed by the inbox cap, or deleted by hand: a gap in history)' },
      acked_by: { type: 'array', items: { type: 'string' }, description: 'devices whose ack cursor under the inbox\'s current epoch has reached seq, sorted ([] after a new epoch until devices ack under it: docs/api.md)' },
    }, ['user', 'seq', 'acked_by']),
  },
}, ['id', 'kind', 'type', 'ts', 'expires_at', 'data', 'recipients'],
'The stored message; recipients is [] for a room message (the record names the room, not its members)');

/** The `{id}` of `GET /v1/messages/{id}` as the OpenAPI document shows it. */
export const documentedMsgIdParam = {
  ...msgId,
  description: 'a message id as an answer gave it: 16 lower-case hex digits (digits 3–4 are its kind, 01–04; the last 12 a counter, never all 0)',
} as const;
