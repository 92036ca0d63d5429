/**
 * One connection's delivery state inside the per-user machine (machine.ts, DESIGN.md
 * §5: `acked`, `sent`, the window in flight), how it starts (`welcome`), how a run of
 * seqs it cannot be sent is reported to it as a `gap` frame, how a page is delivered
 * to it within its window, how its acks move it, and how it is `reset`. Its redelivery
 * rounds are redelivery-rounds.ts.
 */
import type { InboxPage, PageEntry } from '../inbox/inbox.js';
import type { EpochLineage } from '../inbox/lineage.js';
import type { ReadRecord } from '../store/message-store.js';
import { isUnreadable } from '../store/unreadable.js';
import type { ByteRoom, Effect, MachineConfig, PageAllowance } from './effects.js';
import type { GapFrame, MsgFrame } from './frames.js';
import { messageView, type GapReason } from './message-view.js';
import { gapFrameSize, msgFrameSize } from './msg-frame-bytes.js';
import { resentAfterReset, wasResent, type ResentSeqs } from './resent-marks.js';
import { beforeFirst, hadAfterReset, resumePoint, type ResumeRequest } from './resume.js';
import type { SeqNames } from './seq-names.js';

/** A connection's delivery state. */
export interface Conn {
  readonly id: string;
  readonly device: string;
  /** What a page to it may write (effects.ts `ByteRoom`); undefined: none asked (cut at the window only). */
  readonly room: ByteRoom | undefined;
  /** `joining` until the first fetch decides where it starts and `welcome` is sent. */
  phase: 'joining' | 'ready';
  readonly resume: ResumeRequest;
  /** Cumulative ack: every seq ≤ acked is done. */
  acked: number;
  /**
   * The highest seq the client itself acked on this connection, 0 before its first
   * ack (and again after a `reset`): what the device's stored cursor was last asked to
   * hold. Below `acked` when the connection started above what the device had stored
   * (`from=latest`, a `last_seq`, a `gap` on login): the client's ack of such a start
   * moves no cursor of the connection but must still be stored (docs/protocol.md, "ack").
   */
  stored: number;
  /** Highest seq written (as `msg` or `gap`). */
  sent: number;
  /** The seq its sends under the current epoch came after: where it joined (`joinAt`), 0 after a `reset`. */
  sendsAfter: number;
  /** Seqs of `msg` frames sent and not yet acked, ascending; at most `window`. */
  inflight: number[];
  /** Seqs up to this one are sent again as redeliveries (marked). */
  redeliverUpTo: number;
  /**
   * After a `reset`: seqs of the new epoch up to this one are messages the device had
   * under the old one (resume.ts `hadAfterReset`), so a `gap` of them is marked
   * `redelivered` — no news, as a redelivery's (docs/protocol.md "Why a gap"); 0: none.
   */
  hadThrough: number;
  /**
   * After a live `reset`: the seqs of the new epoch this connection was sent under the
   * old one, whose `msg` goes out marked `redelivered` (resent-marks.ts); dropped once
   * sent past. Undefined: none.
   */
  resent: ResentSeqs | undefined;
  /** Redelivery rounds since the last ack progress. */
  rounds: number;
  /** Backpressure: the socket is over its high-water mark, or a page was cut at its byte allowance (`hold`). */
  paused: boolean;
  /** Fairness: when this connection was last the target of a fetch. */
  servedAt: number;
  /**
   * The inbox's latest seq as its `welcome` or last `reset` told it: a seq above it was
   * appended while the connection was open, and its first `msg` on it is a live
   * delivery (the `live` mark of a `send` effect, effects.ts); those up to it are the
   * catch-up it was sent.
   */
  liveAfter: number;
  /**
   * Its `welcome` or last `reset` said `epoch: null` (no inbox then), and no `msg` has
   * told it the epoch since: the next `msg` carries it (docs/protocol.md, `msg`).
   */
  epochUntold: boolean;
}

/**
 * Reports seqs `c.sent + 1 .. to` as missing on connection `c` for `reason`: by
 * extending `gap`, the gap frame sent last, when it ends right before them (its effect
 * is not performed yet) and is of the same reason and marked alike, else with a new gap
 * frame. Advances `c.sent` to `to`.
 * @param reason why they are missing (message-view.ts `GapReason`): runs of different
 *   reasons are separate gaps (docs/protocol.md, `gap`)
 * @param redelivered the seqs were sent on `c` before (a redelivery round): the gap is
 *   marked `redelivered`, as a `msg` sent again is (docs/protocol.md)
 * @returns the gap frame that now ends at `to`
 */
export function gapThrough(
  c: Conn, to: number, reason: GapReason, gap: GapFrame | undefined, effects: Effect[], redelivered = false,
): GapFrame {
  if (gap && gap.to === c.sent && gap.reason === reason && (gap.redelivered === true) === redelivered) {
    gap.to = to;
  } else {
    const from = c.sent + 1;
    gap = redelivered ? { t: 'gap', from, to, reason, redelivered: true } : { t: 'gap', from, to, reason };
    effects.push({ kind: 'send', conn: c.id, frame: gap });
  }
  c.sent = to;
  return gap;
}

/**
 * `trimmed` gaps of the seqs after `c.sent` through `to` that do not exist (trimmed by
 * the cap, deleted by hand): the part that went out on this connection before (up to
 * `c.redeliverUpTo`, a redelivery round) or that the device had before a `reset` (up to
 * `c.hadThrough`) marked `redelivered`, the rest not; the first
 * merged with `gap` where it can be. Nothing when `to` is not after `c.sent`.
 * @returns the gap last sent or extended, or `gap` when none was
 */
function missingThrough(c: Conn, to: number, gap: GapFrame | undefined, effects: Effect[]): GapFrame | undefined {
  const sentBefore = Math.min(to, markedThrough(c));
  if (c.sent < sentBefore) gap = gapThrough(c, sentBefore, 'trimmed', gap, effects, true);
  if (c.sent < to) gap = gapThrough(c, to, 'trimmed', gap, effects);
  return gap;
}

/** The highest seq a `gap` on `c` is marked `redelivered` up to: sent before on it (a redelivery round), or had before its `reset`. */
function markedThrough(c: Conn): number {
  return Math.max(c.redeliverUpTo, c.hadThrough);
}

/**
 * Sends `reset` on connection `c` (its inbox was recreated or restored with less under
 * it, DESIGN.md §11) and restarts its cursors at 0, the start of the new epoch: no
 * message in flight, no redelivery pending, its timer cancelled. Seqs below the first
 * one `page` holds then go out as a `trimmed` gap before it ({@link deliverPage}), so
 * that after a reset too every seq is a `msg` or in a `gap` (docs/protocol.md, `reset`);
 * marked `redelivered` as far as `lineage` shows they are seqs it had (resume.ts
 * `hadAfterReset`); so are the retained messages it was sent before, as far as `names`
 * shows they are the same (resent-marks.ts).
 * @param epoch the epoch `c` counted in until now (the machine's)
 * @param lineage `page`'s epoch's, when read (src/inbox/lineage.ts); undefined: unknown
 * @param names the MsgIDs the machine knew seqs of `epoch` by (epoch-guard.ts); undefined: none
 */
export function resetTo(c: Conn, page: InboxPage, effects: Effect[], epoch?: string | null, lineage?: EpochLineage, names?: SeqNames): void {
  const written = Math.max(c.sent, c.redeliverUpTo);
  c.resent = resentAfterReset(epoch, c.sendsAfter, written, page, lineage, names);
  // What it had under `epoch`: sent on it, or had before a reset whose gap is still to come.
  c.hadThrough = hadAfterReset(epoch, Math.max(written, c.hadThrough), page, lineage);
  effects.push({ kind: 'send', conn: c.id, frame: { t: 'reset', epoch: page.epoch, seq: page.latestSeq } });
  c.epochUntold = page.epoch === null;
  c.liveAfter = page.latestSeq;
  c.acked = c.sent = c.sendsAfter = 0;
  // Seqs of the old inbox: an ack of the new one's first seqs must be stored again.
  c.stored = 0;
  c.inflight = [];
  c.redeliverUpTo = 0;
  c.rounds = 0;
  effects.push({ kind: 'timer', conn: c.id, delayMs: null });
}

/**
 * `welcome`'s `heartbeat`: the ping period `heartbeatMs` in whole seconds, rounded up, at
 * least 1 (docs/protocol.md, `welcome`). An integer, as clients parse it; rounded up so
 * that a client sizing its silence limit by it (twice `heartbeat`, protocol.md
 * "Detecting a dead connection") never sizes it below the pings' period: rounded to the
 * nearest, 1.2 s said 1 (the walk14 tester's F3).
 */
export function welcomeHeartbeat(heartbeatMs: number): number {
  return Math.max(1, Math.ceil(heartbeatMs / 1000));
}

/**
 * Decides where joining connection `c` starts (DESIGN.md §5 "Resume rules") from the
 * first page it waited for; sends `welcome`, then `reset` or `gap` when the resume
 * point asks for one, and makes it ready there.
 * @param heartbeatMs the server heartbeat, shown in `welcome` in whole seconds ({@link welcomeHeartbeat})
 * @param lineage `page`'s epoch's, when read (src/inbox/lineage.ts): after a `reset`, the
 *   seqs it shows the device had under its `last_seq`'s epoch are marked in the gap
 */
export function joinAt(c: Conn, page: InboxPage, user: string, heartbeatMs: number, effects: Effect[], lineage?: EpochLineage): void {
  const { start, cursor, notice } = resumePoint(c.resume, page);
  const r = c.resume;
  c.hadThrough = notice?.t === 'reset' && r.kind === 'after' ? hadAfterReset(r.epoch, r.seq, page, lineage) : 0;
  effects.push({
    kind: 'send',
    conn: c.id,
    frame: {
      t: 'welcome', conn: c.id, user, device: c.device, epoch: page.epoch,
      seq: page.latestSeq, resume_from: start + 1, heartbeat: welcomeHeartbeat(heartbeatMs),
    },
  });
  if (notice) effects.push({ kind: 'send', conn: c.id, frame: notice });
  c.epochUntold = page.epoch === null;
  c.liveAfter = page.latestSeq;
  c.phase = 'ready';
  c.acked = c.sent = c.sendsAfter = cursor;
  c.resent = undefined;
}

/**
 * Sends a ready connection what `page` holds after its cursor, within its window: a
 * `trimmed` gap for seqs trimmed while it was behind and for holes in the stream, an
 * `expired` one for content that expired or vanished (`records[i]` null, or its
 * `expiresAt` not after `nowMs`: read before it expired, sent after), an
 * `undeliverable` one for content whose stored bytes cannot be decoded (the unreadable
 * mark, src/store/unreadable.ts) and for an entry that is not what the append script
 * writes (inbox.ts `MalformedEntry`, which names no message), else a `msg`, marked
 * `redelivered` up to `c.redeliverUpTo` and where `c.resent` has it (a gap up to
 * `c.redeliverUpTo` or `c.hadThrough`); arms its
 * redelivery timer when it had nothing in flight. The page stops, as at the window, after
 * the `msg` whose frames — its own and the page's before it, `gap`s included
 * ({@link framesSize}) — reach `allowance` bytes, never before its first message, and
 * `c` is then paused with a `hold` effect carrying the allowance's `byBudget`: the rest
 * is sent once its writes drain (the machine's `drain`).
 * @param records the content of `page.entries[i]`
 * @param complete the page holds every entry after its start up to its latest seq (it has fewer than were asked for)
 * @param nowMs the time of the sending, ms since the epoch (MachineConfig `now`)
 * @param allowance what the page may write of `msg` and `gap` frames (effects.ts `ByteRoom`); undefined: no bound
 * @returns the last entry it moved `c.sent` onto (the highest delivered), or undefined
 */
export function deliverPage(
  c: Conn, page: InboxPage, records: readonly (ReadRecord | null)[], config: Pick<MachineConfig, 'window' | 'ackTimeoutMs'>, effects: Effect[],
  complete = false, nowMs = Number.NEGATIVE_INFINITY, allowance?: PageAllowance,
): PageEntry | undefined {
  if (c.phase !== 'ready') return undefined;
  const sentFrom = effects.length;
  // Trimmed by the cap while this connection was behind: marked `redelivered` as far
  // as the seqs went out on it before (a redelivery round), as an expired one's is.
  missingThrough(c, beforeFirst(page), undefined, effects);
  const wasIdle = c.inflight.length === 0;
  let gap: GapFrame | undefined;
  let last: PageEntry | undefined;
  const entries = page.entries;
  let bytes = 0;
  /** The page's frames before this index of `effects` are counted in `bytes`. */
  let sizedTo = sentFrom;
  let cut = false;
  for (let i = 0; i < entries.length && c.inflight.length < config.window && !cut; i++) {
    const entry = entries[i] as PageEntry;
    if (entry.seq <= c.sent) continue;
    // A hole in the stream (an entry removed by hand): the page starts at or before
    // this connection's cursor, so the missing seqs do not exist. Say so, never stall.
    // Marked as far as the seqs went out on it before, as a trimmed run is.
    gap = missingThrough(c, entry.seq - 1, gap, effects);
    const record = records[i];
    if (entry.malformed === true || isUnreadable(record)) {
      // Its stored bytes cannot be decoded, for good, or the entry names no message (an
      // operator's XADD): that seq alone is lost, never the ones after it (a failed
      // fetch, retried forever, would stall them all).
      gap = gapThrough(c, entry.seq, 'undeliverable', gap, effects, entry.seq <= markedThrough(c));
    } else if (!record || record.expiresAt <= nowMs) {
      // Content expired or vanished: an `expired` gap of that seq (merged with the one
      // before when that is expired too), marked when the seq went out before (its
      // content expired since). The store's null does not say why; gone is `expired`
      // (docs/decisions.md "Gap reasons"). Content read ahead that expired while it
      // waited for the window is gone too: a read now would find none.
      gap = gapThrough(c, entry.seq, 'expired', gap, effects, entry.seq <= markedThrough(c));
    } else {
      gap = undefined;
      const frame: MsgFrame = { t: 'msg', ...messageView(entry, record) };
      if (entry.seq <= c.redeliverUpTo || wasResent(c.resent, entry)) frame.redelivered = true;
      // Its first send, of a seq appended while the connection was open: timed (effects.ts).
      effects.push(frame.redelivered !== true && entry.seq > c.liveAfter ? { kind: 'send', conn: c.id, frame, live: true } : { kind: 'send', conn: c.id, frame });
      c.inflight.push(entry.seq);
      // Sized only when more could follow it: a live message alone costs nothing.
      if (allowance !== undefined && i < entries.length - 1) {
        cut = (bytes += framesSize(c, effects, sizedTo)) >= allowance.bytes;
        sizedTo = effects.length;
      }
    }
    c.sent = entry.seq;
    last = entry;
  }
  // A page holding every entry after its start (fewer than asked for) shows the seqs
  // after its last entry up to the latest as deleted (by hand, XDEL): a gap, or this
  // connection would wait behind them for the next append, and one at another cursor
  // would make the machine read the inbox again and again for both.
  const lastOfPage = entries[entries.length - 1];
  if (complete && (lastOfPage === undefined || c.sent >= lastOfPage.seq)) missingThrough(c, page.latestSeq, gap, effects);
  if (c.epochUntold && page.epoch !== null) tellEpoch(c, page.epoch, effects, sentFrom);
  if (c.resent !== undefined && c.sent >= c.resent.through) c.resent = undefined;
  if (wasIdle && c.inflight.length > 0 && c.rounds === 0) {
    effects.push({ kind: 'timer', conn: c.id, delayMs: config.ackTimeoutMs });
  }
  if (cut) {
    c.paused = true;
    effects.push({ kind: 'hold', conn: c.id, byBudget: allowance?.byBudget ?? false });
  }
  return last;
}

/**
 * The bytes a socket queues for the `msg` and `gap` frames to `c` in `effects` from
 * index `from` on (msg-frame-bytes.ts `msgFrameSize`, `gapFrameSize`), for cutting a
 * page by bytes ({@link deliverPage}). A gap is sized as it stands: sized before the
 * `msg` after it, it is extended no more (the epoch {@link tellEpoch} may add to the
 * page's first frame is not counted, a msg's or a gap's alike).
 */
function framesSize(c: Conn, effects: readonly Effect[], from: number): number {
  let bytes = 0;
  for (let i = from; i < effects.length; i++) {
    const e = effects[i] as Effect;
    if (e.kind !== 'send' || e.conn !== c.id) continue;
    if (e.frame.t === 'msg') bytes += msgFrameSize(e.frame);
    else if (e.frame.t === 'gap') bytes += gapFrameSize(e.frame);
  }
  return bytes;
}

/**
 * Welcomed (or reset) before the inbox existed, `c` is told the epoch by the first
 * `msg` or `gap` sent to it from `effects[from]` on, so that the client can resume
 * with it (an inbox recreated since is then a `reset`: docs/protocol.md, `msg`).
 */
function tellEpoch(c: Conn, epoch: string, effects: Effect[], from: number): void {
  for (let i = from; i < effects.length; i++) {
    const e = effects[i] as Effect;
    if (e.kind === 'send' && e.conn === c.id && (e.frame.t === 'msg' || e.frame.t === 'gap')) {
      e.frame.epoch = epoch;
      c.epochUntold = false;
      return;
    }
  }
}

/**
 * Applies a client's cumulative ack of every seq up to `seq` to `c` (DESIGN.md §5): the
 * cursor moves, what it covers leaves the window, and the redelivery rounds start over.
 * @returns `moved`; `store` for an ack at or below the cursor that is above what the
 *   client acked before on this connection (the cursor stays, but the device's stored
 *   cursor is to be moved to it: the connection started above it); `stale` for one
 *   that changes nothing; or the reason it is refused (before `welcome`, or above the
 *   last seq sent): nothing moves
 */
export function applyAck(c: Conn, seq: number): 'moved' | 'store' | 'stale' | { refused: string } {
  if (c.phase !== 'ready') return { refused: 'ack before welcome' };
  // A redelivery rewinds `sent` to `acked` until its resend goes out; a seq written
  // before the rewind (up to `redeliverUpTo`) was sent all the same, and the client's
  // late ack of it is valid.
  const highestSent = Math.max(c.sent, c.redeliverUpTo);
  if (seq > highestSent) return { refused: `ack ${seq} is above the last seq sent (${highestSent})` };
  if (seq <= c.acked) {
    if (seq <= c.stored) return 'stale';
    c.stored = seq;
    return 'store';
  }
  c.acked = c.stored = seq;
  // Acked seqs need no resend.
  if (c.sent < seq) c.sent = seq;
  let drop = 0;
  while (drop < c.inflight.length && (c.inflight[drop] ?? 0) <= seq) drop++;
  c.inflight.splice(0, drop);
  c.rounds = 0;
  return 'moved';
}
