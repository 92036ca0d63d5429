/**
 * The connections this node holds, by user (DESIGN.md §4 `conns`): what presence
 * compares an entry naming this node with. An entry of this node whose connection is
 * not held here is stale — Redis came back with older data (a restored AOF, a failover
 * to a replica that was behind) holding a connection that has closed since — and is
 * dropped rather than taken for a newer connection of its device (src/cluster/presence.ts).
 *
 * A connection is held from just before its presence entry is first written (so an
 * entry read back from Redis always finds its connection here while it is open, even
 * mid-handshake) until its removal is asked for (it closed, or never opened).
 */
export class HeldConns {
  /**
   * user → the id of that user's one connection held here, or a set of ids when it has
   * more: most users have one connection, and a one-entry Set costs every idle
   * connection ~200 bytes more than its id (bench:e2e case c).
   */
  readonly #byUser = new Map<string, string | Set<string>>();

  /** Holds `conn` of `user` (before its entry is written). */
  hold(user: string, conn: string): void {
    const held = this.#byUser.get(user);
    if (held === undefined || held === conn) this.#byUser.set(user, conn);
    else if (typeof held === 'string') this.#byUser.set(user, new Set([held, conn]));
    else held.add(conn);
  }

  /** Lets `conn` of `user` go (it closed, or was never admitted); unknown ones are ignored. */
  release(user: string, conn: string): void {
    const held = this.#byUser.get(user);
    if (held === undefined) return;
    if (typeof held === 'string') {
      if (held === conn) this.#byUser.delete(user);
      return;
    }
    held.delete(conn);
    if (held.size === 1) this.#byUser.set(user, held.values().next().value as string);
    else if (held.size === 0) this.#byUser.delete(user);
  }

  /** Whether `conn` of `user` is held here. */
  has(user: string, conn: string): boolean {
    const held = this.#byUser.get(user);
    return typeof held === 'string' ? held === conn : held?.has(conn) ?? false;
  }

  /** The ids of `user`'s connections held here (none: empty). */
  of(user: string): string[] {
    const held = this.#byUser.get(user);
    return held === undefined ? [] : typeof held === 'string' ? [held] : [...held];
  }
}
