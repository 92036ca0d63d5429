/**
 * A node-wide bound on the delivery frames written in one turn of the event loop
 * (DESIGN.md §5 delivery; the live-inbox counterpart of the broadcast fan-out's chunks,
 * src/broadcast/fanout.ts). Inbox reads answered together (ioredis decodes a pipeline's
 * replies in one callback, and their promises settle in one microtask run) or one
 * message offered to every local recipient used to write all their frames in one
 * turn: 1,000 recipients of ten 60 KB messages, 600 MB in one turn, held the loop for
 * seconds. Once a turn has written {@link TURN_BYTES} or {@link TURN_FRAMES}, the
 * sessions that still have frames to write wait for a later turn (session.ts): a
 * fetch's answer waits before the machine takes it (the fetch is still in flight for
 * it, so no event is lost and order holds), and so does an offered append's delivery,
 * with no read (machine.ts `offer`, `defer`): a small message to 1,000 users costs a
 * turn more for half of them, not 500 inbox reads. Waiters are served in the order
 * they began to wait.
 */
import { setImmediate as yieldToLoop } from 'node:timers/promises';

/** Bytes of frames one turn may write before the next session's wait for a later one. */
export const TURN_BYTES = 1024 * 1024;

/**
 * Frames one turn may write; also the broadcast fan-out's chunk, the frames it sends
 * between two yields to the event loop (gateway.ts, ~2–5 ms of work).
 */
export const TURN_FRAMES = 500;

let bytes = 0;
let frames = 0;
let resetPending = false;

function reset(): void {
  bytes = 0;
  frames = 0;
  resetPending = false;
}

/** Counts a frame of `length` bytes written in this turn. */
export function spend(length: number): void {
  bytes += length;
  frames++;
  if (!resetPending) {
    resetPending = true;
    // The next turn starts with a whole budget.
    setImmediate(reset);
  }
}

/** True when this turn has written its share: more frames should wait for {@link nextTurn}. */
export function turnSpent(): boolean {
  return bytes >= TURN_BYTES || frames >= TURN_FRAMES;
}

/** Resolves in a later turn of the event loop (after its I/O), once that turn's budget has room. */
export async function nextTurn(): Promise<void> {
  do await yieldToLoop();
  while (turnSpent());
}
