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

/**
 * Why a run of inbox seqs cannot be delivered (the `reason` of a `gap` frame and of a
 * history `gaps` item, docs/protocol.md "Why a gap"). A client does the same for each —
 * treats the seqs as consumed, may ack through them — and may show each differently:
 * - `trimmed`: the inbox no longer holds those seqs (dropped by the inbox cap while the
 *   device was away, below the first retained seq on resume, or deleted by hand, XDEL);
 * - `expired`: the inbox holds the seq but its content is gone from the store: its
 *   `ttl` passed (and, not told apart, content missing for another reason: a data dir
 *   that lost it, docs/decisions.md "Gap reasons");
 * - `undeliverable`: the content is there but cannot be sent: its stored bytes cannot
 *   be decoded (src/store/unreadable.ts), or it cannot be written as JSON (nested
 *   deeper than the server reads, stored before ingest refused it); or the inbox entry
 *   names no message (not what the append script writes: inbox.ts MalformedEntry).
 */
export type GapReason = (typeof GAP_REASONS)[number];

/** Every {@link GapReason}, in the order docs/protocol.md lists them (the OpenAPI enum). */
export const GAP_REASONS = ['trimmed', 'expired', 'undeliverable'] as const;

/** A run of seqs that cannot be delivered, all for one {@link GapReason}. */
export interface SeqGap {
  /** First missing seq, inclusive. */
  from: number;
  /** Last missing seq, inclusive. */
  to: number;
  /** Why every seq of the run is missing: runs of different reasons are separate gaps. */
  reason: GapReason;
}

/** Builds the view of a stored message at an inbox entry. */
export function messageView(entry: InboxEntry, record: StoredMessage): MessageView {
  const view: MessageView = { seq: entry.seq, id: record.id, type: record.type, ts: record.ts, data: record.data };
  if (record.from !== undefined) view.from = record.from;
  const room = entry.room ?? record.room;
  if (room !== undefined) view.room = room;
  return view;
}

/**
 * Adds missing seqs `from..to` to a list of gaps, merging them into the last gap when
 * adjacent and missing for the same reason: runs of different reasons stay apart, in
 * seq order.
 */
export function addGap(gaps: SeqGap[], from: number, to: number, reason: GapReason): void {
  const last = gaps[gaps.length - 1];
  if (last !== undefined && last.to + 1 === from && last.reason === reason) last.to = to;
  else gaps.push({ from, to, reason });
}
