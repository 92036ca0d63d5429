/**
 * The store's message (`NewMessage`, src/store/record.ts) for a producer's user or room
 * message: what ingest stores, and what it checks before the node's recipient budget.
 */
import type { MsgKind } from '../ids/msg-id.js';
import type { NewMessage } from '../store/message-store.js';
import type { RoomMessageInput, UserMessageInput } from './shapes.js';

/** Where a message goes, as the store records it, and a room message's time (Redis's clock). */
export interface MessageTarget {
  /** user or room (DESIGN.md §2). */
  readonly kind: MsgKind;
  /** A user message's recipients, each once, in the order first named (shapes.ts `distinctRecipients`). */
  readonly to?: readonly string[];
  /** A room message's room id. */
  readonly room?: string;
  /**
   * A room message's time, ms since the epoch on Redis's clock (that of the rooms' join
   * slots: src/rooms/membership.ts); undefined: the store's clock.
   */
  readonly ts?: number;
}

/** The store's message for `input` sent to `target`. */
export function newMessage(input: UserMessageInput | RoomMessageInput, target: MessageTarget): NewMessage {
  const msg: NewMessage = { kind: target.kind, type: input.type, data: input.data };
  if (target.ts !== undefined) msg.tsMs = target.ts;
  if (target.to !== undefined) msg.to = target.to;
  if (target.room !== undefined) msg.room = target.room;
  if (input.from !== undefined) msg.from = input.from;
  if (input.client_msg_id !== undefined) msg.clientMsgId = input.client_msg_id;
  if (input.ttl !== undefined) msg.ttlMs = input.ttl * 1000;
  return msg;
}
