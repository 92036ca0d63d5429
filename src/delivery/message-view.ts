/**
 * The one shape of a delivered message, shared by the WebSocket `msg` frame
 * (DESIGN.md §6) and the HTTP history routes (DESIGN.md §7), so a client parses one
 * format whichever way it reads.
 */
import type { InboxEntry } from '../inbox/inbox.js';
import type { StoredMessage } from '../store/message-store.js';

/** A message at its place in one user's inbox. */
export interface MessageView {
  /** Position in the user's inbox (DESIGN.md §2). */
  seq: number;
  /** MsgID, 16 hex digits; the same for every recipient. */
  id: string;
  type: string;
  from?: string;
  /** The room, for room messages. */
  room?: string;
  /** When Pixiu accepted it, ms since the epoch. */
  ts: number;
  data: unknown;
}

/** A run of seqs that cannot be delivered: trimmed by the inbox cap, or expired. */
export interface SeqGap {
  /** First missing seq, inclusive. */
  from: number;
  /** Last missing seq, inclusive. */
  to: number;
}

/** Builds the view of a stored message at an inbox entry. */
export function messageView(entry: InboxEntry, record: StoredMessage): MessageView {
  const view: MessageView = { seq: entry.seq, id: record.id, type: record.type, ts: record.ts, data: record.data };
  if (record.from !== undefined) view.from = record.from;
  const room = entry.room ?? record.room;
  if (room !== undefined) view.room = room;
  return view;
}

/** Adds one missing seq to a list of gaps, merging it into the last gap when adjacent. */
export function addGap(gaps: SeqGap[], from: number, to: number): void {
  const last = gaps[gaps.length - 1];
  if (last !== undefined && last.to + 1 === from) last.to = to;
  else gaps.push({ from, to });
}
