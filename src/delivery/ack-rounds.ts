/**
 * The node-wide cadence of ack-cursor writes (DESIGN.md §5: persisted coalesced, at
 * most every 100 ms per user). A session with acks to write joins the next round; one
 * timer per node then flushes every session of the round in the same tick, so their
 * writes leave together in one Redis pipeline (ioredis auto-pipelining) rather than
 * one round trip per user on a timer of its own. A user is written at most once a
 * round, and rounds are `intervalMs` apart.
 */

/** What a round flushes: a session's pending ack cursors. */
export interface AckFlushable {
  /** Writes the pending ack cursors now. Never rejects. */
  flushAcks(): Promise<void>;
}

/** The rounds of one node. */
export class AckRounds {
  readonly #intervalMs: number;
  #due = new Set<AckFlushable>();
  #timer: NodeJS.Timeout | undefined;

  /** @param intervalMs time between rounds, ms (setting `ackFlushIntervalMs`, default 100) */
  constructor(intervalMs: number) {
    this.#intervalMs = intervalMs;
  }

  /** Sessions waiting for the next round. */
  get pending(): number {
    return this.#due.size;
  }

  /** Puts `session` in the next round (once, however often it asks). */
  add(session: AckFlushable): void {
    this.#due.add(session);
    // Unref'd: a round is due while the node runs (its server holds the process), and
    // must not hold a stopped one (a retry round after close() on a Redis outage).
    this.#timer ??= setTimeout(() => this.#round(), this.#intervalMs).unref();
  }

  /**
   * Takes `session` out of the next round (it flushed on its own: last logout,
   * shutdown). A round left with nobody is not kept waiting: its timer, which would hold
   * a stopping process for up to `intervalMs`, is cleared.
   */
  delete(session: AckFlushable): void {
    this.#due.delete(session);
    if (this.#due.size === 0 && this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
  }

  #round(): void {
    this.#timer = undefined;
    const due = this.#due;
    this.#due = new Set();
    for (const session of due) void session.flushAcks();
  }
}
