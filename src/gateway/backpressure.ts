/**
 * Backpressure of one socket (DESIGN.md §5): delivery pauses when the bytes queued
 * on the socket pass the high-water mark (`PIXIU_SOCKET_HIGH_WATER`), resumes once
 * they drain below half of it, and the connection is closed 4009 when the queue
 * passes the hard cap (`PIXIU_SOCKET_HARD_CAP`) or stays paused longer than
 * `PIXIU_PAUSED_TIMEOUT`. These functions decide; the connection keeps the one piece
 * of state (its paused-too-long timer) and acts (ws-connection.ts). No object per
 * connection: an idle connection's memory is a target (bench:e2e, case c).
 */

/** The settings read (bytes). */
export interface BackpressureLimits {
  readonly socketHighWaterBytes: number;
  readonly socketHardCapBytes: number;
}

/** What a write asks of the connection. */
export type WriteVerdict = 'ok' | 'pause' | 'close';

/**
 * After a write that left `buffered` bytes queued.
 * @param paused whether delivery is paused already
 * @returns `close` over the hard cap; `pause` when this write crossed the high-water
 *   mark (pause delivery and start the paused-too-long timer); `ok` otherwise
 */
export function afterWrite(buffered: number, paused: boolean, limits: BackpressureLimits): WriteVerdict {
  if (buffered > limits.socketHardCapBytes) return 'close';
  return !paused && buffered > limits.socketHighWaterBytes ? 'pause' : 'ok';
}

/** A write completed with `buffered` bytes still queued: true when a pause ends (below half the high-water mark). */
export function drained(buffered: number, paused: boolean, limits: BackpressureLimits): boolean {
  return paused && buffered < limits.socketHighWaterBytes / 2;
}

/** Calls each of `waiters` (a connection's catch-ups waiting for a pause to end), if any. */
export function wakeAll(waiters: readonly (() => void)[] | undefined): void {
  if (waiters !== undefined) for (const wake of waiters) wake();
}
