/**
 * A connection's redelivery timer (DESIGN.md §5 "Redelivery"): what happens when it
 * fires — a round that sends again from `acked + 1`, the back-off after it, 4008 after
 * the last one — when a round is over, and the wait started over at a drain (none runs
 * while paused: docs/protocol.md "Flow control"). On a {@link Conn} (connection-state.ts),
 * with no I/O: the machine (machine.ts) performs nothing but these effects.
 */
import { CloseCode } from './close-codes.js';
import type { Conn } from './connection-state.js';
import type { Effect, MachineConfig } from './effects.js';

/**
 * True when `c` awaits nothing of a redelivery timer: no ack (nothing in flight) and no
 * resend of a round still to go out (its cursor is back past what a round rewound).
 */
function awaitsNothing(c: Conn): boolean {
  return c.inflight.length === 0 && c.sent >= c.redeliverUpTo;
}

/**
 * Ends the redelivery round of a connection that {@link awaitsNothing} (its last
 * message in flight became a gap, say): its timer can stop, and the next message sent
 * starts a new round's count (deliverPage arms the timer at rounds 0). Left counted,
 * that next message was never redelivered nor closed 4008.
 * @returns true when the connection is idle (stop its timer); else the timer stays
 */
export function endRoundIfIdle(c: Conn): boolean {
  const idle = awaitsNothing(c);
  if (idle) c.rounds = 0;
  return idle;
}

/**
 * The redelivery timer of a ready connection fired (DESIGN.md §5): send again from
 * `acked + 1` (what was sent before goes out marked `redelivered`) and wait the next
 * back-off, or, after the last one, close 4008. Paused, it has no round (run then, it
 * went out at the resume, as the client began acking: docs/protocol.md "Flow
 * control"): its timer is kept, uncounted, and its drain starts it over ({@link restartedWait}).
 * @returns true when the machine should pump: the connection's cursor was rewound, or
 *   the last round's resend has not gone out yet
 */
export function redeliveryRound(c: Conn, config: Pick<MachineConfig, 'ackTimeoutMs' | 'backoffMs'>, effects: Effect[]): boolean {
  if (c.paused) {
    const wait = restartedWait(c, config);
    if (wait) effects.push(wait);
    return false;
  }
  // The round's resend went out and awaits no ack (its seqs were gaps: content expired
  // since, or unsendable): the round is over (endRoundIfIdle).
  if (endRoundIfIdle(c)) return false;
  const waits = config.backoffMs;
  if (c.inflight.length === 0) {
    // The last round's resend has not gone out (its fetch failed or is slow): keep the
    // timer, or nothing would ever resend or close. The client was sent nothing to
    // answer, so this wait is not counted as a round.
    effects.push({ kind: 'timer', conn: c.id, delayMs: roundWait(c, config) });
    return true;
  }
  if (c.rounds >= waits.length) {
    effects.push({ kind: 'close', conn: c.id, code: CloseCode.ackTimeout, reason: 'ack timeout' });
    return false;
  }
  c.rounds += 1;
  // Send again from acked + 1: rewind the cursor; what was sent before is marked.
  c.redeliverUpTo = Math.max(c.redeliverUpTo, c.sent);
  c.sent = c.acked;
  c.inflight = [];
  effects.push({ kind: 'timer', conn: c.id, delayMs: waits[c.rounds - 1] ?? null });
  return true;
}

/** The wait under way on `c`: the ack timeout before a round, else the back-off after the last one, ms. */
function roundWait(c: Conn, config: Pick<MachineConfig, 'ackTimeoutMs' | 'backoffMs'>): number {
  return config.backoffMs[c.rounds - 1] ?? config.ackTimeoutMs;
}

/**
 * The wait under way on `c` (ack timeout, or back-off after a round), from now: at its
 * drain, as paused it could neither read nor ack, and ran no round ({@link redeliveryRound};
 * docs/protocol.md "Flow control": the ack timeout counts from the resume). One that
 * never acks still gets its rounds and 4008, counted from the resume.
 * @returns the timer effect; undefined when `c` awaits no ack and has no resend to go out
 */
export function restartedWait(c: Conn, config: Pick<MachineConfig, 'ackTimeoutMs' | 'backoffMs'>): Effect | undefined {
  if (c.phase !== 'ready' || awaitsNothing(c)) return undefined;
  return { kind: 'timer', conn: c.id, delayMs: roundWait(c, config) };
}
