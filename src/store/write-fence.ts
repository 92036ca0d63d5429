/**
 * The store's write fence (DESIGN.md §9: one store, one running node): the time until
 * which the node's store lease is known to be its own, on a clock that never steps.
 * The lease is renewed in Redis every few seconds (src/cluster/store-ownership.ts);
 * between renewals nothing else says whether it still holds. A node cut off from Redis,
 * or a process paused past the lease's TTL (SIGSTOP, a long GC pause, a frozen VM),
 * may have lost its store to another node by the time it writes: so a put is refused,
 * and a batch is not written nor answered, once the clock has passed the deadline the
 * last renewal that confirmed the lease set ({@link WriteFence.confirm}).
 *
 * The clock is read at each check rather than a timer flipping a flag at the deadline:
 * after a pause, the requests that queued meanwhile are read before the overdue timers
 * run (Node's poll phase comes before the next timers phase).
 */
import { unavailable, type PixiuError } from '../errors.js';

/** What a put refused by the fence is answered with (UNAVAILABLE: 503 with Retry-After). */
const FENCED = 'message store writes are suspended: this node\'s store lease has not been confirmed in time '
  + '(Redis did not answer its renewals, or this process was paused): another node may serve its store now; '
  + 'writes resume once a renewal confirms the lease is still this node\'s';

/** The deadline of a store's writes by its lease; none (writes always taken) until {@link confirm} sets one. */
export class WriteFence {
  readonly #clock: () => number;
  /** On {@link #clock}: writes are taken while the clock is below it. */
  #until = Infinity;

  /** @param clock a clock that never steps, ms from any origin (`performance.now`) */
  constructor(clock: () => number) {
    this.#clock = clock;
  }

  /**
   * Takes writes until `until` on the fence's clock (a renewal confirmed the lease:
   * store-ownership.ts sets it to the renewal's start plus the lease's TTL less a margin).
   */
  confirm(until: number): void {
    this.#until = until;
  }

  /** UNAVAILABLE when the deadline has passed; undefined while writes are taken. One clock read. */
  refusal(): PixiuError | undefined {
    return this.#clock() < this.#until ? undefined : unavailable(FENCED);
  }
}
