/**
 * The fields that name a request on its failure lines (README "Logging: tying a retry to
 * its first attempt"; walk26 L1): besides the `reqId` every request line has (the
 * client's `X-Request-Id` when it sent one: request-ids.ts), its `method` and `route` (the
 * route's pattern, as the 401 warning names it: no user id), the `clientMsgId` of its
 * body when it has one, and the `msgId` of the message it stored or found stored under
 * that key before it failed (a 503 of its appends, the first message of a 409). A
 * producer knows its `client_msg_id`, and the `id` once an answer reached it: either
 * finds the lines of every attempt.
 */
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import type { Logger } from '../logger.js';
import { clientMsgId } from './schemas.js';

/** A `client_msg_id` as the routes' schemas take it: built from schemas.ts `clientMsgId`'s pattern (Ajv's `u` flag), one rule. */
const CLIENT_MSG_ID = new RegExp(clientMsgId.pattern, 'u');

/** The fields {@link requestFields} gives. */
export interface RequestFields {
  readonly method: string;
  readonly route: string;
  readonly clientMsgId?: string;
  readonly msgId?: string;
}

/** The message each failed request had stored, noted by its route ({@link noteStored}). */
const storedBy = new WeakMap<FastifyRequest, string>();

/**
 * Notes that `req`, which is failing, had stored (or found stored under its key) the
 * message `msgId`: its failure line names it ({@link requestFields}).
 */
export function noteStored(req: FastifyRequest, msgId: string | undefined): void {
  if (msgId !== undefined) storedBy.set(req, msgId);
}

/** The `method`, `route`, and when known `clientMsgId` and `msgId` of a failing request, for its log line. */
export function requestFields(req: FastifyRequest): RequestFields {
  return {
    method: req.method,
    route: req.routeOptions.url ?? req.url.split('?')[0] ?? '',
    ...messageFields(req.body, storedBy.get(req)),
  };
}

/**
 * The `clientMsgId` of a message body (a batch item) and the `msgId` it was stored as,
 * each when there is one. A key is taken only as the routes' schema takes it
 * ({@link CLIENT_MSG_ID}): one its validation would refuse is logged by no line.
 */
export function messageFields(body: unknown, msgId?: string): { clientMsgId?: string; msgId?: string } {
  const key = typeof body === 'object' && body !== null ? (body as { client_msg_id?: unknown }).client_msg_id : undefined;
  const known = typeof key === 'string' && CLIENT_MSG_ID.test(key);
  return { ...(known ? { clientMsgId: key } : {}), ...(msgId === undefined ? {} : { msgId }) };
}

/**
 * The debug line of a message (a batch item) done, `message accepted` (201, or 200 a
 * duplicate): its `msgId`, `clientMsgId` when it has one, `recipients` (how many inboxes
 * got it: a room's members) and `duplicate`. Built only when debug is on: the caller asks first.
 */
export function acceptedFields(body: unknown, result: { id: string; recipients: readonly unknown[] | number; duplicate: boolean }): object {
  const recipients = typeof result.recipients === 'number' ? result.recipients : result.recipients.length;
  return { ...messageFields(body, result.id), recipients, duplicate: result.duplicate };
}

/** Whether `log` writes debug lines: asked before building one on a hot path (pino's `isLevelEnabled`). */
export function debugOn(log: FastifyBaseLogger): boolean {
  const { isLevelEnabled } = log as Partial<Logger>;
  return typeof isLevelEnabled === 'function' && isLevelEnabled.call(log, 'debug');
}
