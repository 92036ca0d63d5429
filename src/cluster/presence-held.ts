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
  /** user → ids of that user's connections held here. */
  readonly #byUser = new Map<string, Set<string>>();

  /** Holds `conn` of `user` (before its entry is written). */
  hold(user: string, conn: string): void {
    let conns = this.#byUser.get(user);
    if (conns === undefined) this.#byUser.set(user, conns = new Set());
    conns.add(conn);
  }

  /** Lets `conn` of `user` go (it closed, or was never admitted); unknown ones are ignored. */
  release(user: string, conn: string): void {
    const conns = this.#byUser.get(user);
    if (conns === undefined) return;
    conns.delete(conn);
    if (conns.size === 0) this.#byUser.delete(user);
  }

  /** Whether `conn` of `user` is held here. */
  has(user: string, conn: string): boolean {
    return this.#byUser.get(user)?.has(conn) ?? false;
  }

  /** The ids of `user`'s connections held here (none: empty). */
  of(user: string): string[] {
    return [...(this.#byUser.get(user) ?? [])];
  }
}
