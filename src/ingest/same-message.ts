/**
 * What makes a retry the same message as the first one stored under its
 * `client_msg_id` (docs/api.md "Messages", docs/decisions.md "HTTP").
 */
import { isDeepStrictEqual } from 'node:util';
import { PixiuError } from '../errors.js';
import type { PutResult } from '../store/message-store.js';
import type { RoomMessageInput, UserMessageInput } from './ingest.js';

/**
 * A `client_msg_id` names one message (DESIGN.md §7): sent again, the body must be
 * the one first stored under it, as an idempotency key is reused only with the same
 * request. Compared: the recipients (as a set) or the room, `type`, `from` and `data`
 * (as the JSON value it is stored as: object keys in any order, `1.0` is `1`); not
 * `ttl`. A put that stored a new message passes at once, so only retries pay for it.
 *
 * @param named the new request's distinct recipients; undefined for a room message
 * @throws PixiuError CONFLICT when they differ (nothing is appended)
 */
export function checkSameMessage(put: PutResult, input: UserMessageInput | RoomMessageInput, named?: readonly string[]): void {
  if (!put.duplicate) return;
  const first = put.message;
  const sameTarget = named === undefined
    ? 'room' in input && first.room === input.room && first.to === undefined
    : first.room === undefined && sameSet(first.to ?? [], named);
  if (sameTarget && first.type === input.type && first.from === input.from && isDeepStrictEqual(asStored(first.data), asStored(input.data))) return;
  throw new PixiuError('CONFLICT', `client_msg_id ${JSON.stringify(first.clientMsgId ?? '')} was first used for another message `
    + `(${put.id}: its recipients or room, type, from or data differ); send a new message with a new client_msg_id`);
}

/** A value as storing it as JSON and reading it back gives it (`-0` is 0, `1e400` null, …). */
function asStored(value: unknown): unknown {
  const json = JSON.stringify(value);
  if (json === undefined) return undefined;
  const parsed: unknown = JSON.parse(json);
  return parsed;
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  const inA = new Set(a);
  return b.every((x) => inA.has(x));
}
