/**
 * Backpressure of one socket (DESIGN.md §5): delivery pauses when the bytes queued
 * on the socket pass the high-water mark (`PIXIU_SOCKET_HIGH_WATER`), resumes once
 * they drain below half of it, and the connection is closed 4009 when the queue
 * passes the hard cap (`PIXIU_SOCKET_HARD_CAP`) or stays paused longer than
 * `PIXIU_PAUSED_TIMEOUT`. These functions decide and the connection acts
 * (ws-connection.ts); its one piece of state is a {@link Pause}, made when delivery
 * pauses and dropped when the pause ends. No object per connection otherwise: an idle
 * connection's memory is a target (bench:e2e, case c).
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

/**
 * A connection's pause, from the write that crossed the high-water mark to the
 * {@link drained} write or the close: its paused-too-long timer and the catch-ups
 * waiting for it to end (broadcasts from `last_bseq`, a channel's history).
 */
export class Pause {
  readonly #timer: NodeJS.Timeout;
  /** Made by the first waiter (most pauses have none). */
  #waiters: (() => void)[] | undefined;

  /**
   * Starts the paused-too-long timer.
   * @param timeoutMs `PIXIU_PAUSED_TIMEOUT`, ms
   * @param onTimeout called once the pause has lasted `timeoutMs` (the connection closes 4009)
   */
  constructor(timeoutMs: number, onTimeout: () => void) {
    this.#timer = setTimeout(onTimeout, timeoutMs);
  }

  /** A promise that resolves when the pause ends ({@link end}). */
  whenOver(): Promise<void> {
    return new Promise((resolve) => (this.#waiters ??= []).push(resolve));
  }

  /** Ends the pause: stops the timer and wakes every waiter once. Idempotent. */
  end(): void {
    clearTimeout(this.#timer);
    const waiters = this.#waiters;
    this.#waiters = undefined;
    if (waiters !== undefined) for (const wake of waiters) wake();
  }
}
