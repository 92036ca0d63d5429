/**
 * Where a connection's delivery starts (DESIGN.md §5 "Resume rules"), decided from
 * what the client asked for and what the inbox holds. Pure: no I/O.
 *
 * - `last_seq` given and the epoch matches (or none given) → after it;
 * - the epoch differs, or `last_seq` is above the latest seq → `reset`, then from seq 0
 *   of the new epoch: a `trimmed` gap of the seqs below the first retained entry, then
 *   that entry (connection-state.ts joinAt and deliverPage);
 * - `last_seq` below the first retained seq − 1 → `gap` (reason `trimmed`) of the missing
 *   range, then from the first retained entry;
 * - no `last_seq`: the device's stored cursor (handled as `after` with the epoch it
 *   counts in: one a rotation kept of an older epoch resets, as a `last_seq` of that
 *   epoch does; Inbox.deviceCursor), else the first retained entry, with no `gap`
 *   (taken for a device that never had anything: so is one whose acks never reached
 *   Redis, which skips unseen what the cap trimmed past what it processed, and one whose
 *   cursor Redis lost; docs/protocol.md, case 4);
 * - `from=latest` → after the latest seq.
 *
 * After a `reset`, the part of that `trimmed` gap the device is known to have had under
 * the old epoch is marked `redelivered` ({@link hadAfterReset}); the rest is news.
 */
import type { InboxPage } from '../inbox/inbox.js';
import type { EpochLineage } from '../inbox/lineage.js';
import type { GapFrame, ResetFrame } from './frames.js';

/** Where a connection asks to start. */
export type ResumeRequest =
  /** After `seq`: the client's `last_seq` (with its `epoch` if it gave one), or the device's stored cursor. */
  | { readonly kind: 'after'; readonly seq: number; readonly epoch?: string }
  /** `from=latest`: only messages appended from now on. */
  | { readonly kind: 'latest' }
  /** Nothing known: from the first retained entry. */
  | { readonly kind: 'first' };

/**
 * The decision: send `notice` first when there is one, then deliver after `cursor`.
 * `start` is where the first message sent comes after (`welcome`'s `resume_from` is
 * `start + 1`): the cursor too, except after a `reset`, whose cursor is 0 — seqs
 * restart, and those below the first retained one go out as a `trimmed` gap before it.
 */
export interface ResumePoint {
  readonly start: number;
  readonly cursor: number;
  readonly notice?: GapFrame | ResetFrame;
}

/** The newest seq a `reset` or a resume from the first retained entry starts after. */
export function beforeFirst(page: InboxPage): number {
  return Math.max(0, Math.min(page.firstSeq - 1, page.latestSeq));
}

/** Applies the resume rules to one request and the inbox's bounds. */
export function resumePoint(r: ResumeRequest, page: InboxPage): ResumePoint {
  if (r.kind === 'latest') return { start: page.latestSeq, cursor: page.latestSeq };
  const first = beforeFirst(page);
  if (r.kind === 'first') return { start: first, cursor: first };
  if (resetsOn(r, page)) {
    return { start: first, cursor: 0, notice: { t: 'reset', epoch: page.epoch, seq: page.latestSeq } };
  }
  if (r.seq < first) return { start: first, cursor: first, notice: { t: 'gap', from: r.seq + 1, to: first, reason: 'trimmed' } };
  return { start: r.seq, cursor: r.seq };
}

/**
 * Where a joining connection's first fetch starts. For `from=latest` nothing after the
 * start is wanted yet, so the fetch only reads the inbox's bounds.
 */
export function joinCursor(r: ResumeRequest): number {
  if (r.kind === 'after') return r.seq;
  if (r.kind === 'latest') return Number.MAX_SAFE_INTEGER;
  return 0;
}

/**
 * True when `r` resumes above the latest seq of the inbox's own epoch (a client's
 * `last_seq` with its `epoch`, or a stored cursor): the device was sent seqs the inbox
 * no longer has, so Redis gave it back with less while no connection was there to see
 * it. The epoch must then be replaced, as for a connection that sees it live, or the
 * lost seqs, assigned again, would be skipped by every other device holding a cursor
 * of this epoch (DESIGN.md §11; docs/decisions.md "Redis with less than it had"). A
 * client's wrong `last_seq` looks the same: such rotations have a cool-down
 * (epoch-guard.ts), within which the device is reset alone ({@link resetsOn}).
 */
export function resumesAboveLatest(r: ResumeRequest, page: InboxPage): boolean {
  return r.kind === 'after' && page.epoch !== null && r.epoch === page.epoch && r.seq > page.latestSeq;
}

/**
 * After a `reset` to `page`'s epoch, the newest seq of it that a device is known to
 * have had: it had every seq up to `position` under `epoch`, and `page`'s epoch goes on
 * from that one's numbering through `lineage.through` (a rotation keeps the stream:
 * src/inbox/lineage.ts), so its seqs up to both are the messages the device had. Those
 * of the `trimmed` gap that follows the `reset` go out marked `redelivered`, the rest as
 * news (docs/protocol.md "Why a gap"). 0 when nothing is known: no lineage (an inbox
 * created afresh after a loss, whose seqs restart; one an older node's script rotated),
 * one of other epochs (a chain of rotations), or a `reset` under the same epoch (a
 * `last_seq` above the latest) — the whole gap is then news: a needless "you missed
 * some" rather than a miss shown as nothing.
 * @param position the highest seq the device had or was told of under `epoch` (a
 *   `last_seq`, what a connection was sent), or that it never needed (a new device's start)
 */
export function hadAfterReset(epoch: string | null | undefined, position: number, page: InboxPage, lineage: EpochLineage | undefined): number {
  if (lineage === undefined || page.epoch === null || lineage.epoch !== page.epoch || lineage.replaced !== epoch) return 0;
  return Math.max(0, Math.min(position, lineage.through));
}

/** True when joining at `r` on `page` starts with a `reset` ({@link resumePoint}). */
export function resetsOn(r: ResumeRequest, page: InboxPage): boolean {
  return r.kind === 'after' && ((r.epoch !== undefined && r.epoch !== page.epoch) || r.seq > page.latestSeq);
}
