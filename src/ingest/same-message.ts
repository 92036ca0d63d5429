/**
 * What makes a retry the same message (or broadcast) as the first one stored under its
 * `client_msg_id` (docs/api.md "Messages" and "Broadcast", docs/decisions.md "HTTP").
 */
import { isDeepStrictEqual } from 'node:util';
import { PixiuError } from '../errors.js';
import { MsgKind } from '../ids/msg-id.js';
import type { PutResult } from '../store/message-store.js';
import type { RoomMessageInput, UserMessageInput } from './shapes.js';

/**
 * A `client_msg_id` names one message (DESIGN.md §7): sent again, the body must be
 * the one first stored under it, as an idempotency key is reused only with the same
 * request. Compared: the recipients (as a set) or the room, `type`, `from` and `data`
 * (as the JSON value it is stored as: object keys in any order, `1.0` is `1`); not
 * `ttl`. A put that stored a new message passes at once, so only retries pay for it.
 *
 * @param named the new request's distinct recipients; undefined for a room message
 * @throws PixiuError CONFLICT when they differ, or the first was a broadcast (nothing is appended)
 */
export function checkSameMessage(put: PutResult, input: UserMessageInput | RoomMessageInput, named?: readonly string[]): void {
  if (!put.duplicate) return;
  const first = put.message;
  if (first.kind === MsgKind.broadcast) throw keyConflict(put, 'it is a broadcast, not a message to users or a room');
  const sameTarget = named === undefined
    ? 'room' in input && first.room === input.room && first.to === undefined
    : first.room === undefined && sameSet(first.to ?? [], named);
  if (sameTarget && first.type === input.type && first.from === input.from && sameData(first.data, input.data)) return;
  throw keyConflict(put, 'its recipients or room, type, from or data differ');
}

/**
 * A broadcast's retry under its `client_msg_id` (src/broadcast/broadcaster.ts): the
 * first message stored under it must be a broadcast with the same `type` and `data`
 * (compared as in {@link checkSameMessage}; not `ttl`). Its tags are compared apart,
 * with what its first append recorded (the record has none). A put that stored a new
 * broadcast passes at once.
 * @throws PixiuError CONFLICT when the first message is no broadcast, or differs (nothing is appended)
 */
export function checkSameBroadcast(put: PutResult, input: { readonly type: string; readonly data: unknown }): void {
  if (!put.duplicate) return;
  const first = put.message;
  if (first.kind !== MsgKind.broadcast) throw keyConflict(put, 'it is a message to users or a room, not a broadcast', 'broadcast');
  if (first.type !== input.type || !sameData(first.data, input.data)) throw keyConflict(put, 'its type or data differ', 'broadcast');
}

/**
 * The refusal of a `client_msg_id` sent again with other content than the message
 * first stored under it (`put`, a duplicate): 409, naming that message, as a broadcast
 * when it is one (a walk4 nit: a broadcast's 409 said "message" throughout), and `how`
 * it differs. Of the same kind, the commonest cause is a retry whose body was rebuilt
 * (a timestamp in `data`) after a first attempt that was stored but whose answer was
 * lost: the words say that message was stored, and that a retry sends the very same
 * body — a new key would deliver it twice (walk26 L3: "send a new message with a new
 * client_msg_id" was the advice). Of the other kind it is no retry: a new key.
 * @param sent what the refused request is: a message (to users or a room) or a broadcast
 */
export function keyConflict(put: PutResult, how: string, sent: 'message' | 'broadcast' = 'message'): PixiuError {
  const first = put.message.kind === MsgKind.broadcast ? 'broadcast' : 'message';
  const used = `client_msg_id ${JSON.stringify(put.message.clientMsgId ?? '')} was first used for another ${first} (${put.id}: ${how})`;
  if (first !== sent) return new PixiuError('CONFLICT', `${used}; send a new ${sent} with a new client_msg_id`);
  return new PixiuError('CONFLICT', `${used}; nothing was ${sent === 'broadcast' ? 'published' : 'appended'}. ${retryAdvice(sent, put.id, 'stored')}`);
}

/**
 * What a 409 of a reused key tells a retry (docs/api.md "Messages"): the first attempt
 * was done (as `id`), a retry sends the very same body, and a new key is for another one.
 * @param what a message, broadcast or publication
 * @param id the first one's id, as its answer gave it (a MsgID; a publication's stream entry id)
 * @param done how the first one was done: stored, published
 */
export function retryAdvice(what: string, id: string, done: string): string {
  return `If this is a retry of that ${what}, it was ${done} as ${id}: to retry, send the very same body; a new client_msg_id is for a different ${what}`;
}

/** True when two `data` values are one JSON value as stored (object keys in any order, `1.0` is `1`). */
function sameData(first: unknown, again: unknown): boolean {
  return isDeepStrictEqual(asStored(first), asStored(again));
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
