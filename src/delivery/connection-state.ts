/**
 * One connection's delivery state inside the per-user machine (machine.ts, DESIGN.md
 * §5: `acked`, `sent`, the window in flight), how it starts (`welcome`), how a run of
 * seqs it cannot be sent is reported to it as a `gap` frame, and how it is `reset`.
 */
import type { InboxPage } from '../inbox/inbox.js';
import type { Effect } from './effects.js';
import type { GapFrame } from './frames.js';
import { beforeFirst, resumePoint, type ResumeRequest } from './resume.js';

/** A connection's delivery state. */
export interface Conn {
  readonly id: string;
  readonly device: string;
  /** `joining` until the first fetch decides where it starts and `welcome` is sent. */
  phase: 'joining' | 'ready';
  readonly resume: ResumeRequest;
  /** Cumulative ack: every seq ≤ acked is done. */
  acked: number;
  /** Highest seq written (as `msg` or `gap`). */
  sent: number;
  /** Seqs of `msg` frames sent and not yet acked, ascending; at most `window`. */
  inflight: number[];
  /** Seqs up to this one are sent again as redeliveries (marked). */
  redeliverUpTo: number;
  /** Redelivery rounds since the last ack progress. */
  rounds: number;
  /** Backpressure: the socket is over its high-water mark. */
  paused: boolean;
  /** Fairness: when this connection was last the target of a fetch. */
  servedAt: number;
}

/**
 * Reports seqs `c.sent + 1 .. to` as missing on connection `c`: by extending `gap`,
 * the gap frame sent last, when it ends right before them (its effect is not performed
 * yet) and is marked alike, else with a new gap frame. Advances `c.sent` to `to`.
 * @param redelivered the seqs were sent on `c` before (a redelivery round): the gap is
 *   marked `redelivered`, as a `msg` sent again is (docs/protocol.md)
 * @returns the gap frame that now ends at `to`
 */
export function gapThrough(c: Conn, to: number, gap: GapFrame | undefined, effects: Effect[], redelivered = false): GapFrame {
  if (gap && gap.to === c.sent && (gap.redelivered === true) === redelivered) {
    gap.to = to;
  } else {
    gap = redelivered ? { t: 'gap', from: c.sent + 1, to, redelivered: true } : { t: 'gap', from: c.sent + 1, to };
    effects.push({ kind: 'send', conn: c.id, frame: gap });
  }
  c.sent = to;
  return gap;
}

/**
 * Sends `reset` on connection `c` (its inbox was recreated or restored with less under
 * it, DESIGN.md §11) and restarts its cursors before the first seq `page` holds: no
 * message in flight, no redelivery pending, its timer cancelled.
 */
export function resetTo(c: Conn, page: InboxPage, effects: Effect[]): void {
  effects.push({ kind: 'send', conn: c.id, frame: { t: 'reset', epoch: page.epoch, seq: page.latestSeq } });
  c.acked = c.sent = beforeFirst(page);
  c.inflight = [];
  c.redeliverUpTo = 0;
  c.rounds = 0;
  effects.push({ kind: 'timer', conn: c.id, delayMs: null });
}

/**
 * Decides where joining connection `c` starts (DESIGN.md §5 "Resume rules") from the
 * first page it waited for; sends `welcome`, then `reset` or `gap` when the resume
 * point asks for one, and makes it ready there.
 * @param heartbeatMs the server heartbeat, shown in `welcome` in whole seconds (at least 1)
 */
export function joinAt(c: Conn, page: InboxPage, user: string, heartbeatMs: number, effects: Effect[]): void {
  const { start, notice } = resumePoint(c.resume, page);
  effects.push({
    kind: 'send',
    conn: c.id,
    frame: {
      t: 'welcome', conn: c.id, user, device: c.device, epoch: page.epoch,
      seq: page.latestSeq, resume_from: start + 1, heartbeat: Math.max(1, Math.round(heartbeatMs / 1000)),
    },
  });
  if (notice) effects.push({ kind: 'send', conn: c.id, frame: notice });
  c.phase = 'ready';
  c.acked = c.sent = start;
}
