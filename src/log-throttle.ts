/**
 * Thinning of one log line that an outage repeats (a 503 per request, a failed ack
 * write per user and retry): the first is logged, then at most one per interval, which
 * carries how many were left out since. An operator sees the outage begin and go on
 * without thousands of identical lines (a fresh-user finding: 12,758 lines of
 * `request unavailable` over a few Redis outages).
 */
export class LogThrottle {
  readonly #intervalMs: number;
  /** When the next line may be logged, ms on the caller's clock (the last one logged was an interval before). */
  #nextAt = 0;
  #left = 0;

  /** @param intervalMs least time between two logged lines, ms */
  constructor(intervalMs: number) {
    this.#intervalMs = intervalMs;
  }

  /**
   * Asks to log one more line now.
   * @param nowMs now on the caller's clock, ms (default `Date.now()`; every caller of one
   *   throttle uses the same clock)
   * @returns undefined when it is to be left out; else how many were left out since
   *   the last one logged (0 for the first)
   */
  take(nowMs: number = Date.now()): number | undefined {
    // An interval of 0 thins nothing, whatever the clock did: no state is kept, so the
    // callers sharing EVERY_LINE never see one another's times (nor a clock set back).
    if (this.#intervalMs <= 0) return 0;
    // Before the last line logged: the caller's clock was set back (the wall clock: NTP,
    // a VM resumed). Not thinned, else the line stayed silent for the size of the step —
    // an hour's outage unlogged after a step back of an hour (walk31 F4's check of the
    // node's timers).
    if (nowMs < this.#nextAt && nowMs >= this.#nextAt - this.#intervalMs) {
      this.#left += 1;
      return undefined;
    }
    return this.force(nowMs);
  }

  /**
   * Logs one line now whatever the interval: for a line whose content changed enough
   * that the one last logged now misleads (the clock warning's offset changing sign).
   * The next interval counts from now.
   * @param nowMs now on the caller's clock, ms (the clock of {@link take})
   * @returns how many were left out since the last one logged
   */
  force(nowMs: number = Date.now()): number {
    const left = this.#left;
    this.#left = 0;
    this.#nextAt = nowMs + this.#intervalMs;
    return left;
  }
}

/** Thins nothing: every line is logged (`take` always answers 0). For a caller given no throttle. */
export const EVERY_LINE = new LogThrottle(0);

/** How often a repeated outage line is logged at most, ms. */
export const OUTAGE_LOG_INTERVAL_MS = 10_000;

/** The fields a thinned line adds: `notLogged`, when lines were left out before it. */
export function thinnedFields(left: number): { notLogged?: number } {
  return left > 0 ? { notLogged: left } : {};
}
