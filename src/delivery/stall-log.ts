/**
 * The log lines of one user's delivery stall (session.ts): from its first failed read
 * (or epoch rotation) to the read that succeeds, or to the user's last connection here
 * closing.
 *
 * Every failed pull asks the node's thinning (log-throttle.ts, one throttle for all of
 * the node's users), so a stall that goes on is logged again at that pace — once per
 * 10 s on a node (docs/api.md "Errors") — each line with `failures` (in a row),
 * `stalledMs` and `notLogged`, the failed pulls of any user left out since the last
 * line. (Only a streak's first failure used to ask: a stall of minutes showed as one
 * line at its start, an ops finding.) A stall of which a warning was logged logs its
 * end at info, `delivery resumed` (or `delivery stall over …` when nobody is left to
 * deliver to), so every stall an operator saw has its end in the log; the end of one
 * the thinning left out is a debug line, which keeps an outage of thousands of users
 * to a few lines.
 *
 * `stalledMs` is measured on a clock that never steps (`performance.now()`), as the
 * gateway's and delivery's other durations are (walk31 F4): on the wall clock, an NTP
 * step back of an hour during a stall logged `stalledMs` ≈ −3,600,000, a forward one a
 * stall an hour longer than it was (reread-clock F9). The thinning still takes the wall
 * clock: its throttle is the node's, shared by every session (log-throttle.ts).
 */
import { outageFields } from '../errors.js';
import type { Logger } from '../logger.js';
import { EVERY_LINE, thinnedFields, type LogThrottle } from '../log-throttle.js';

/** The warning of a failed delivery pull. */
export const FETCH_FAILED_LOG = 'delivery fetch failed, will retry';
/** The line of a stalled user's delivery going on again (a read succeeded). */
export const RESUMED_LOG = 'delivery resumed';
/** The line of a stall ended by the user's last connection here closing, no read having succeeded. */
export const STALL_OVER_LOG = 'delivery stall over: the user has no connection left on this node';

/** One user's stall, while it lasts. */
interface Stall {
  /** When its first failure happened, ms on the monotonic clock (`performance.now()`: a wall-clock step never stretches `stalledMs`). */
  readonly sinceMono: number;
  /** True once a line of it was logged at warn. */
  logged: boolean;
}

/** The stall lines of one user's session. */
export class StallLog {
  readonly #user: string;
  readonly #logger: Logger;
  readonly #throttle: LogThrottle;
  #stall: Stall | undefined;

  /**
   * @param throttle the node's thinning of failed pulls, shared by its sessions (on the
   *   wall clock, as every caller of it); default: every line logged
   */
  constructor(user: string, logger: Logger, throttle: LogThrottle = EVERY_LINE) {
    this.#user = user;
    this.#logger = logger;
    this.#throttle = throttle;
  }

  /** ms the current stall has lasted (whole ms), 0 for none. */
  #stalledMs(): number {
    return this.#stall === undefined ? 0 : Math.round(performance.now() - this.#stall.sinceMono);
  }

  /**
   * A stall begins here unless one is on; for a failure logged by its caller (an
   * epoch rotation's warning): `logged` marks the stall as seen.
   */
  begin(logged = false): void {
    this.#stall ??= { sinceMono: performance.now(), logged: false };
    if (logged) this.#stall.logged = true;
  }

  /**
   * A pull failed, the `failures`-th in a row: a warning when the node's thinning lets
   * it through, else a debug line.
   */
  fetchFailed(err: unknown, failures: number): void {
    this.begin(false);
    // An outage's warning: its reason, no stack (docs/api.md "Errors").
    const context = { ...outageFields(err), user: this.#user, failures, stalledMs: this.#stalledMs() };
    const left = this.#throttle.take(Date.now());
    if (left === undefined) {
      this.#logger.debug(context, FETCH_FAILED_LOG);
      return;
    }
    this.#logger.warn({ ...context, ...thinnedFields(left) }, FETCH_FAILED_LOG);
    if (this.#stall !== undefined) this.#stall.logged = true;
  }

  /** A pull succeeded after `failures` failures in a row (0: no stall, nothing logged). */
  resumed(failures: number): void {
    this.#end(RESUMED_LOG, failures);
  }

  /** The user's last connection here closed while delivery was stalled. */
  noConnectionLeft(failures: number): void {
    this.#end(STALL_OVER_LOG, failures);
  }

  #end(msg: string, failures: number): void {
    const stall = this.#stall;
    if (stall === undefined) return;
    const context = { user: this.#user, stalledMs: this.#stalledMs(), failures };
    this.#stall = undefined;
    if (stall.logged) this.#logger.info(context, msg);
    else this.#logger.debug(context, msg);
  }
}
