/**
 * The hub: this node's registry of locally connected users and their sessions
 * (centrifuge's "hub"). Notifies for local users land here in-process; the gateway
 * attaches and detaches connections; shutdown closes them all.
 */
import type { InboxEntry } from '../inbox/inbox.js';
import type { StoredMessage } from '../store/record.js';
import { AckRounds } from './ack-rounds.js';
import type { ResumeRequest } from './machine.js';
import { UserSession, type DeliveryConnection, type SessionDeps } from './session.js';

/** The local registry. */
export class Hub {
  readonly #deps: SessionDeps;
  readonly #sessions = new Map<string, UserSession>();
  readonly #ackRounds: AckRounds;
  /** conn id → its user, for kicks and lookups by id. */
  readonly #owners = new Map<string, string>();

  /**
   * @param ackFlushMs time between the node's rounds of ack-cursor writes, ms
   *   (DESIGN.md §5: at most every 100 ms per user)
   */
  constructor(deps: SessionDeps, ackFlushMs: number) {
    this.#deps = deps;
    this.#ackRounds = new AckRounds(ackFlushMs);
  }

  /** Users with at least one connection here. */
  get users(): number {
    return this.#sessions.size;
  }

  /** Connections here. */
  get connections(): number {
    return this.#owners.size;
  }

  /** True when the user has a connection on this node. */
  has(user: string): boolean {
    return this.#sessions.has(user);
  }

  /** The user's session here, if any. */
  session(user: string): UserSession | undefined {
    return this.#sessions.get(user);
  }

  /** The user's connections here (empty when none). */
  connectionsOf(user: string): readonly DeliveryConnection[] {
    return this.#sessions.get(user)?.connections ?? [];
  }

  /** A connection by id, if it is here. */
  connection(connId: string): DeliveryConnection | undefined {
    const user = this.#owners.get(connId);
    return user === undefined ? undefined : this.#sessions.get(user)?.connections.find((c) => c.id === connId);
  }

  /** Adds a connection to its user's session (creating it) and logs it in. */
  attach(user: string, conn: DeliveryConnection, resume: ResumeRequest): UserSession {
    let session = this.#sessions.get(user);
    if (session === undefined) {
      session = new UserSession(user, this.#deps, this.#ackRounds);
      this.#sessions.set(user, session);
    }
    this.#owners.set(conn.id, user);
    session.login(conn, resume);
    return session;
  }

  /** Removes a closed connection; drops the session when it was the user's last here. */
  detach(user: string, connId: string): void {
    this.#owners.delete(connId);
    const session = this.#sessions.get(user);
    if (session?.logout(connId)) this.#sessions.delete(user);
  }

  /** An append for `user` happened: wake its session if it is here. */
  notify(user: string, seq?: number): void {
    this.#sessions.get(user)?.notify(seq);
  }

  /** A local append for `user` (its entry, epoch and record): hand it to its session if it is here. */
  offer(user: string, entry: InboxEntry, epoch: string, record: StoredMessage): void {
    this.#sessions.get(user)?.offer(entry, epoch, record);
  }

  /** Closes every connection (shutdown: 1001) and writes every pending ack cursor. */
  async closeAll(code: number, reason: string): Promise<void> {
    const sessions = [...this.#sessions.values()];
    for (const s of sessions) for (const c of s.connections) c.close(code, reason);
    await Promise.all(sessions.map((s) => s.flushAcks()));
  }
}
