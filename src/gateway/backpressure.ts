/**
 * Backpressure of one socket (DESIGN.md §5): delivery pauses when the bytes queued
 * on the socket pass the high-water mark (`PIXIU_SOCKET_HIGH_WATER`), resumes once
 * they drain below half of it, and the connection is closed 4009 when the queue
 * passes the hard cap (`PIXIU_SOCKET_HARD_CAP`) or stays paused longer than
 * `PIXIU_PAUSED_TIMEOUT`. This decides; the connection acts (ws-connection.ts).
 */

/** The settings it reads (bytes, ms). */
export interface BackpressureLimits {
  readonly socketHighWaterBytes: number;
  readonly socketHardCapBytes: number;
  readonly pausedTimeoutMs: number;
}

/** What a write asks of the connection. */
export type WriteVerdict = 'ok' | 'pause' | 'close';

/** One socket's pause state: paused exactly while its paused-too-long timer runs. */
export class Backpressure {
  readonly #limits: BackpressureLimits;
  #pausedTimer: NodeJS.Timeout | undefined;

  constructor(limits: BackpressureLimits) {
    this.#limits = limits;
  }

  get paused(): boolean {
    return this.#pausedTimer !== undefined;
  }

  /**
   * After a write that left `buffered` bytes queued.
   * @param onPausedTooLong run if a pause this write starts lasts `pausedTimeoutMs`
   * @returns `close` over the hard cap; `pause` when this write crossed the high-water
   *   mark (delivery must pause); `ok` otherwise
   */
  afterWrite(buffered: number, onPausedTooLong: () => void): WriteVerdict {
    if (buffered > this.#limits.socketHardCapBytes) return 'close';
    if (this.paused || buffered <= this.#limits.socketHighWaterBytes) return 'ok';
    this.#pausedTimer = setTimeout(onPausedTooLong, this.#limits.pausedTimeoutMs);
    return 'pause';
  }

  /**
   * A write completed with `buffered` bytes still queued.
   * @returns true when a pause ends here (below half the high-water mark): resume delivery
   */
  drained(buffered: number): boolean {
    if (!this.paused || buffered >= this.#limits.socketHighWaterBytes / 2) return false;
    this.stop();
    return true;
  }

  /** Ends a pause without resuming (the connection closed). */
  stop(): void {
    clearTimeout(this.#pausedTimer);
    this.#pausedTimer = undefined;
  }
}
