/**
 * Connections admitted to presence whose WebSocket is not open yet (DESIGN.md §6).
 *
 * Between its presence entry (connect-route.ts, before the upgrade) and its open
 * WebSocket, a connection is in no delivery session, so a kick by connection id finds
 * nothing to close. Without this list, handshakes of one device made at the same
 * moment each replaced the one before in presence, but every one of them opened and
 * stayed: ten sockets for one device, none closed 4002, and the user's connection
 * limit bypassed (only the last had a presence entry). A kick that reaches a pending
 * handshake is kept here, and the handshake closes its WebSocket with it as soon as
 * it opens.
 */

/** Why a pending handshake must close once its WebSocket opens. */
export interface Kick {
  /** Close code (src/delivery/close-codes.ts), e.g. 4002 replaced. */
  readonly code: number;
  readonly reason: string;
}

/** Which pending handshakes a kick reaches: a user's, optionally one connection's or one device's. */
export interface KickTarget {
  readonly user: string;
  readonly conn?: string;
  readonly device?: string;
}

interface Pending {
  readonly user: string;
  readonly device: string;
  kick?: Kick;
}

/** The pending handshakes of this node, by connection id. */
export class PendingHandshakes {
  readonly #byConn = new Map<string, Pending>();

  /** Records a handshake admitted to presence as `conn` (user, device). */
  add(conn: string, user: string, device: string): void {
    this.#byConn.set(conn, { user, device });
  }

  /** Marks every pending handshake `target` names to close with `kick` once open (the first kick stays). */
  kick(target: KickTarget, kick: Kick): void {
    const pending = target.conn !== undefined ? [this.#byConn.get(target.conn)] : this.#byConn.values();
    for (const p of pending) {
      if (p !== undefined && p.user === target.user && (target.device === undefined || p.device === target.device)) p.kick ??= kick;
    }
  }

  /**
   * Ends a handshake: its WebSocket opened, or it never will.
   * @returns the kick it received while pending, if any: the caller closes with it
   */
  settle(conn: string): Kick | undefined {
    const p = this.#byConn.get(conn);
    this.#byConn.delete(conn);
    return p?.kick;
  }
}
