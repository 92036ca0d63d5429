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
 *
 * When Redis answered the renewals but refused them (full under `noeviction`, a
 * read-only replica …: src/redis/state-replies.ts), the refusal says so in Redis's
 * plain words, as the 503s before the deadline did: a full Redis lasting past the
 * deadline was answered, and shown by `/readyz`, as a lease the node could not renew
 * "(Redis did not answer its renewals, or this process was paused)", though Redis had
 * answered (a black-box SRE's finding).
 */
import { unavailable, type PixiuError } from '../errors.js';

/** What a put refused by the fence is answered with (UNAVAILABLE: 503 with Retry-After). */
const FENCED = 'message store writes are suspended: this node\'s store lease has not been confirmed in time '
  + '(Redis did not answer its renewals, or this process was paused): another node may serve its store now; '
  + 'writes resume once a renewal confirms the lease is still this node\'s';

/** {@link FENCED} when Redis answered the renewals with a refusal, in its plain words (`reason`). */
function refusedFence(reason: string): string {
  return `message store writes are suspended: ${reason}, so this node's store lease could not be renewed in time; `
    + 'writes resume once Redis takes a renewal that confirms the lease is still this node\'s';
}

/** The deadline of a store's writes by its lease; none (writes always taken) until {@link confirm} sets one. */
export class WriteFence {
  readonly #clock: () => number;
  /** On {@link #clock}: writes are taken while the clock is below it. */
  #until = Infinity;
  /** Redis's refusal of the last renewal, in plain words; undefined when it was confirmed, or failed otherwise. */
  #refusedBy: string | undefined;

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
    this.#refusedBy = undefined;
  }

  /**
   * The last renewal failed (the deadline stays where it was).
   * @param refusal Redis's refusal of it in plain words (`Redis refuses writes: it is
   *   out of memory (maxmemory)`: src/redis/state-replies.ts), which a refusal past the
   *   deadline then gives; undefined when Redis did not answer it (down, timed out)
   */
  renewalFailed(refusal: string | undefined): void {
    this.#refusedBy = refusal;
  }

  /** UNAVAILABLE when the deadline has passed; undefined while writes are taken. One clock read. */
  refusal(): PixiuError | undefined {
    if (this.#clock() < this.#until) return undefined;
    return unavailable(this.#refusedBy === undefined ? FENCED : refusedFence(this.#refusedBy));
  }
}
