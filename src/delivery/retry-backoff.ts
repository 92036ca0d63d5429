/**
 * A user session's back-off after failed reads (session.ts): an inbox fetch or an
 * epoch rotation that failed is retried by a heartbeat after `retryMs`, doubled per
 * failure in a row up to {@link MAX_RETRY_FACTOR} times; a notify or a heartbeat in the
 * meantime pulls at once. Also keeps whether the user's delivery stalls (SessionDeps
 * `onStalled`) and logs the stall (stall-log.ts: each failure, its end), from the same
 * count of failures in a row. Made by the session on its first failure: a user whose
 * reads succeed keeps none.
 */
import type { StallLog } from './stall-log.js';

/** The retry wait after failed fetches grows up to this many times `retryMs`. */
export const MAX_RETRY_FACTOR = 4;

/** The failures in a row of one user's reads, and the retry armed after them. */
export class RetryBackoff {
  readonly #retryMs: number;
  readonly #heartbeat: () => void;
  readonly #onStalled: ((stalled: boolean) => void) | undefined;
  readonly #stalls: StallLog;
  #retryTimer: NodeJS.Timeout | undefined;
  /** Fetches (and rotations) failed in a row. */
  #failures = 0;
  /** True from a failed fetch, while connections are here, until a fetch succeeds (SessionDeps `onStalled`). */
  #stalled = false;

  /**
   * @param retryMs the first wait, ms (SessionDeps `retryMs`)
   * @param heartbeat the retry: the session's heartbeat
   * @param onStalled told each change of the stalled flag (SessionDeps `onStalled`)
   * @param stalls the user's stall log lines
   */
  constructor(retryMs: number, heartbeat: () => void, onStalled: ((stalled: boolean) => void) | undefined, stalls: StallLog) {
    this.#retryMs = retryMs;
    this.#heartbeat = heartbeat;
    this.#onStalled = onStalled;
    this.#stalls = stalls;
  }

  /**
   * Counts a failed fetch (one streak of an outage, one back-off) and logs it; with
   * `alone` (the user's last connection here closed while the read ran) the stall ends
   * there. Returns the failures in a row now.
   */
  fetchFailed(err: unknown, alone: boolean): number {
    const failures = ++this.#failures;
    this.#stalls.fetchFailed(err, failures);
    if (alone) this.#stalls.noConnectionLeft(failures);
    return failures;
  }

  /**
   * Counts a failed epoch rotation with the fetches (one streak, one back-off); its
   * caller logs it, a warning for the first of a streak. Returns the failures in a row now.
   */
  rotationFailed(): number {
    const failures = ++this.#failures;
    this.#stalls.begin(failures === 1);
    return failures;
  }

  /** A fetch succeeded: the streak ends (its end logged), and delivery no longer stalls. */
  succeeded(): void {
    this.#stalls.resumed(this.#failures);
    this.#failures = 0;
    this.#setStalled(false);
  }

  /**
   * After a failed read or epoch rotation: a heartbeat in `retryMs`, doubled per
   * failure up to {@link MAX_RETRY_FACTOR} times, while a connection is here, or while
   * a rotation is owed and still retried (session.ts `owesRotation`, not after its
   * `stopRetrying`); delivery is stalled until a fetch succeeds.
   * @param alone no connection of the user is here
   * @param retriesRotation the session owes an epoch rotation, and retries it with nobody here
   */
  later(alone: boolean, retriesRotation: boolean): void {
    clearTimeout(this.#retryTimer);
    // A session whose last connection closed while the call ran has nobody to retry
    // for, unless the rotation it owes: the loss it proved is known nowhere else.
    if (alone && !retriesRotation) return;
    if (!alone) this.#setStalled(true);
    const factor = Math.min(2 ** (this.#failures - 1), MAX_RETRY_FACTOR);
    this.#retryTimer = setTimeout(() => this.#heartbeat(), this.#retryMs * factor);
    if (alone) this.#retryTimer.unref();
  }

  /**
   * The user's last connection here closed: a retry armed for an owed rotation goes on
   * but no longer keeps the process alive, any other is cleared; not stalled any more.
   */
  leftAlone(owesRotation: boolean): void {
    if (owesRotation) this.#retryTimer?.unref();
    else clearTimeout(this.#retryTimer);
    this.#setStalled(false);
    this.#stalls.noConnectionLeft(this.#failures);
  }

  /**
   * Shutdown: clears a retry armed with no connection here (`alone`). That none is armed
   * again then is the session's to say ({@link later}'s `retriesRotation`): it marks the
   * stop without making this object, which a session that never failed does not have.
   */
  stop(alone: boolean): void {
    if (alone) clearTimeout(this.#retryTimer);
  }

  #setStalled(stalled: boolean): void {
    if (this.#stalled === stalled) return;
    this.#stalled = stalled;
    this.#onStalled?.(stalled);
  }
}
