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
 *
 * That rule saw only a running node's steps: a node started with its clock ahead took
 * that clock as it was, and deleted for good records that still had that long to live
 * (walk31 F2: started 2 h ahead, messages with 59 minutes left were swept, and a retry
 * after the clock was put right stored a second copy under a new id). So, when the
 * store is given Redis's clock (a serving node's registry, counted on the monotonic
 * clock: NodeRegistry.redisClock), the cutoff is also never more than
 * `CLOCK_SKEW_BOUND_MS` (1 s) ahead of it, and until Redis's clock is first known (the
 * first registry renewal, at start) a sweep deletes nothing. That cap bounds each
 * cutoff returned, never the one remembered for the monotonic rule: remembered, a
 * single dip of Redis's clock (a day behind, then corrected; a failover to a replica
 * whose clock is behind) left every node's sweeps that far behind until it restarted
 * (review-clock R2).
 *
 * A retry of a `client_msg_id` judges whether the record first stored under it still
 * lives by the same bound ({@link SweepClock.liveNow}): judged by the node's own clock,
 * a node ahead took a record the sweeps keep (it lives by Redis's clock) for expired and
 * stored the retry a second time, under a new id (review-clock R1).
 */
import { CLOCK_SKEW_BOUND_MS } from '../redis/redis-clock.js';

/** Sweep cutoffs of one store. */
export class SweepClock {
  readonly #wall: () => number;
  readonly #monotonic: () => number;
  readonly #redisClock: (() => number | undefined) | undefined;
  /** The last cutoff (ms since the epoch) and the monotonic reading it was taken at (ms). */
  #cutoff: number;
  #at: number;

  /**
   * Starts the bound at the wall clock's reading now (the store's open).
   *
   * @param wall the store's clock, ms since the epoch
   * @param monotonic a clock that never steps, ms from any origin (default
   *   `performance.now`)
   * @param redisClock now by Redis's clock, ms since the epoch, undefined until known
   *   (store-options.ts `redisClock`); not given: no such bound
   */
  constructor(wall: () => number, monotonic: () => number = () => performance.now(), redisClock?: () => number | undefined) {
    this.#wall = wall;
    this.#monotonic = monotonic;
    this.#redisClock = redisClock;
    this.#cutoff = wall();
    this.#at = monotonic();
  }

  /**
   * The cutoff for a sweep starting now, ms since the epoch: the wall clock's reading
   * or, when that ran ahead of the monotonic clock since the last cutoff, the last
   * cutoff plus the monotonic time since; and never more than `CLOCK_SKEW_BOUND_MS`
   * past Redis's clock when given. 0 (deletes nothing) while Redis's clock is given but
   * not known yet; the bound then stays as it was.
   */
  cutoff(): number {
    const at = this.#monotonic();
    const cutoff = Math.min(this.#wall(), this.#cutoff + Math.max(0, at - this.#at));
    const redis = this.#redisClock?.();
    if (this.#redisClock !== undefined && redis === undefined) return 0;
    // The ratchet keeps the uncapped cutoff: it absorbs the node's own steps; fed the
    // cap, it would keep every dip of Redis's clock as a lag until restart (review-clock R2).
    this.#cutoff = cutoff;
    this.#at = at;
    return bounded(cutoff, redis);
  }

  /**
   * Now for judging whether a stored record still lives where a wrong "expired" would
   * store a second copy (a `client_msg_id` retry, client-id-index.ts), ms since the
   * epoch: the wall clock, but never more than `CLOCK_SKEW_BOUND_MS` past Redis's clock
   * when that is known — the bound the sweeps' cutoff keeps, so a record they keep is
   * the one a retry is answered with. The wall clock as it is while Redis's is not known.
   */
  liveNow(): number {
    const wall = this.#wall();
    return bounded(wall, this.#redisClock?.());
  }
}

/** `ms`, but never more than {@link CLOCK_SKEW_BOUND_MS} past `redis` (Redis's clock) when that is known: the one bound of the sweeps' cutoff and of `liveNow`. */
function bounded(ms: number, redis: number | undefined): number {
  return redis === undefined ? ms : Math.min(ms, redis + CLOCK_SKEW_BOUND_MS);
}
