/**
 * The cutoff an expiry sweep deletes up to (DESIGN.md §3: retention). Reads judge
 * expiry by the wall clock, which only hides a record for as long as the clock is
 * wrong; a sweep deletes it for good, and with it the `client_msg_id` entry a retry
 * would find. So a sweep's cutoff is the wall clock, but never further ahead of the
 * previous cutoff than the monotonic clock has moved since: a forward step of the
 * wall clock (a bad NTP server, an operator's `date -s`) while the node runs deletes
 * nothing early. The price of that rule: after such a step the sweeps lag behind the
 * wall clock by the step until the process restarts (records stay on disk that long
 * after they expired, still unreadable); a step backwards lowers the cutoff at once.
 */

/** Sweep cutoffs of one store. */
export class SweepClock {
  readonly #wall: () => number;
  readonly #monotonic: () => number;
  /** The last cutoff (ms since the epoch) and the monotonic reading it was taken at (ms). */
  #cutoff: number;
  #at: number;

  /**
   * Starts the bound at the wall clock's reading now (the store's open).
   *
   * @param wall the store's clock, ms since the epoch
   * @param monotonic a clock that never steps, ms from any origin (default
   *   `performance.now`)
   */
  constructor(wall: () => number, monotonic: () => number = () => performance.now()) {
    this.#wall = wall;
    this.#monotonic = monotonic;
    this.#cutoff = wall();
    this.#at = monotonic();
  }

  /**
   * The cutoff for a sweep starting now, ms since the epoch: the wall clock's reading
   * or, when that ran ahead of the monotonic clock since the last cutoff, the last
   * cutoff plus the monotonic time since.
   */
  cutoff(): number {
    const at = this.#monotonic();
    const cutoff = Math.min(this.#wall(), this.#cutoff + Math.max(0, at - this.#at));
    this.#cutoff = cutoff;
    this.#at = at;
    return cutoff;
  }
}
