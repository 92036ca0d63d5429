/**
 * Presence entries of closed connections whose removal failed (Redis down or not
 * answering), kept and removed again once Redis answers (DESIGN.md §4 `conns`).
 *
 * Without this, an entry of a connection that closed during an outage stayed until it
 * expired (two heartbeats and 5 s, ~55 s by default): `GET /v1/users/{uid}/presence`
 * listed the device as online and its slot counted against the per-user limit, so new
 * devices got 429 for that long after Redis was back (a fresh-user finding). Ack
 * cursors were already retried that way; presence removals were dropped.
 *
 * A removal is kept only until the entry would have expired anyway (`until`): past
 * that, readers ignore and prune it, so memory is bounded by the connections closed
 * within one entry lifetime.
 *
 * presence-settle.ts (`UnansweredAdds`) runs the settling of adds whose reply was lost
 * on it too, each carrying its handshake's `since` as the value: there each "removal"
 * is one presence-settle-2 call per user.
 */

/** Users whose removals one retry sends at once. */
const RETRY_CONCURRENCY = 64;

/**
 * Removes the entries `conns` of `user` in one call; rejects when Redis fails.
 * `values[i]` is what {@link PendingRemovals.add} was given with `conns[i]`.
 */
export type RemoveEntries<V = undefined> = (user: string, conns: readonly string[], values: readonly (V | undefined)[]) => Promise<void>;

/** One pending removal: when its entry has expired anyway (ms since the epoch), and what the caller keeps with it. */
interface Pending<V> {
  readonly until: number;
  readonly value: V | undefined;
}

/**
 * Removals still to do, retried on a timer while any is left; each may carry a value
 * `V` of the caller's, handed back with it (the settling of an add: its handshake's time).
 */
export class PendingRemovals<V = undefined> {
  /** user → conn → its pending removal. */
  readonly #pending = new Map<string, Map<string, Pending<V>>>();
  readonly #remove: RemoveEntries<V>;
  readonly #retryMs: number;
  #timer: NodeJS.Timeout | undefined;
  #retrying: Promise<void> | undefined;
  #stopped = false;

  /**
   * @param remove what removes entries (one call per user: an HDEL, or a settling script)
   * @param retryMs how often to try again while removals are pending, ms
   */
  constructor(remove: RemoveEntries<V>, retryMs: number) {
    this.#remove = remove;
    this.#retryMs = retryMs;
  }

  /** How many removals are pending (metrics, tests). */
  get size(): number {
    let n = 0;
    for (const conns of this.#pending.values()) n += conns.size;
    return n;
  }

  /**
   * Keeps the removal of `conn`'s entry for a retry.
   * @param until ms since the epoch after which the entry has expired (its last expiry)
   * @param value handed back with `conn` to the removal (default: none)
   */
  add(user: string, conn: string, until: number, value?: V): void {
    if (this.#stopped) return;
    let conns = this.#pending.get(user);
    if (conns === undefined) this.#pending.set(user, conns = new Map());
    conns.set(conn, { until, value });
    this.#schedule();
  }

  /**
   * Removes the pending entries of `user` now (before a connection of theirs is
   * admitted, so their slots are free for it). The removal is sent before this returns,
   * so a command the caller sends next on the same connection runs after it. Never
   * rejects: what fails stays pending.
   */
  async retryUser(user: string): Promise<void> {
    const conns = this.#pending.get(user);
    if (conns === undefined) return;
    await this.#retry(user, conns);
  }

  /**
   * Tries every pending removal once (on the timer, and when Redis is back). One retry
   * runs at a time; while any removal is left, the next is scheduled. Never rejects.
   */
  retryAll(): Promise<void> {
    this.#retrying ??= (async () => {
      try {
        const users = [...this.#pending];
        for (let i = 0; i < users.length; i += RETRY_CONCURRENCY) {
          const done = await Promise.all(users.slice(i, i + RETRY_CONCURRENCY).map(([user, conns]) => this.#retry(user, conns)));
          // Redis still failing: the rest would fail the same way; try again later.
          if (done.includes(false)) break;
        }
      } finally {
        this.#retrying = undefined;
        if (this.#pending.size > 0) this.#schedule();
      }
    })();
    return this.#retrying;
  }

  /** Stops retrying and forgets what is pending (shutdown: the node leaves the registry, and readers drop its entries). */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#pending.clear();
  }

  /** Arms the retry timer unless it is armed or retrying has stopped (it holds no exit up). */
  #schedule(): void {
    if (this.#stopped) return;
    this.#timer ??= setTimeout(() => {
      this.#timer = undefined;
      void this.retryAll();
    }, this.#retryMs).unref();
  }

  /** One call of `remove` for `user`'s pending removals; true when it succeeded (or nothing was left to do). */
  async #retry(user: string, conns: Map<string, Pending<V>>): Promise<boolean> {
    const now = Date.now();
    for (const [conn, { until }] of conns) if (until <= now) conns.delete(conn);
    const todo = [...conns.keys()];
    if (todo.length === 0) {
      this.#pending.delete(user);
      return true;
    }
    try {
      await this.#remove(user, todo, todo.map((conn) => conns.get(conn)?.value));
    } catch {
      return false;
    }
    for (const conn of todo) conns.delete(conn);
    if (conns.size === 0 && this.#pending.get(user) === conns) this.#pending.delete(user);
    return true;
  }
}
