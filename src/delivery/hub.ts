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
   * Sessions whose user left this node while they held ack cursors unwritten (a write
   * failed on Redis and waits for its retry): kept until written, so a reconnect here
   * writes them before it reads the cursors ({@link flushAcks}) instead of resuming
   * before what the device acked.
   */
  readonly #leaving = new Map<string, Set<UserSession>>();
  /**
   * Sessions whose user left this node while they owed an epoch rotation their
   * deliveries proved (its Redis call failed: epoch-guard.ts), or while a read that may
   * prove one was in flight (session.ts `readInFlight`): kept, retrying on their
   * back-off, until the read is judged and the rotation it asks for, or the one owed,
   * is made, or the user's next connection here takes them back. Dropped with the
   * session, the loss it proved (or was about to) was forgotten: a device back with a
   * `last_seq` that new appends had passed again skipped the seqs assigned again, with
   * no `reset` (docs/decisions.md "Redis with less than it had").
   */
  readonly #owing = new Map<string, UserSession>();
  /** Shutdown began ({@link closeAll}): a rotation still owed is lost with the process. */
  #closing = false;

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

  /**
   * Users with no connection here whose session is kept for a rotation it owes, or for
   * a read in flight that may prove one ({@link #owing}); 0 once each is settled, and
   * after {@link closeAll}. Tests read it.
   */
  get owingRotations(): number {
    return this.#owing.size;
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

  /**
   * Adds a connection to its user's session (creating it, or taking back the one left
   * owing a rotation: its connections wait for that rotation) and logs it in.
   */
  attach(user: string, conn: DeliveryConnection, resume: ResumeRequest): UserSession {
    let session = this.#sessions.get(user);
    if (session === undefined) {
      session = this.#owing.get(user) ?? new UserSession(user, this.#deps, this.#ackRounds);
      this.#owing.delete(user);
      // One taken back may also be kept for its unwritten acks: it is the user's session
      // again, whose acks flushAcks writes as such, so it leaves #leaving (a session is
      // in at most one of the two).
      const kept = this.#leaving.get(user);
      if (kept?.delete(session) === true && kept.size === 0) this.#leaving.delete(user);
      this.#sessions.set(user, session);
    }
    this.#owners.set(conn.id, user);
    session.login(conn, resume);
    return session;
  }

  /**
   * Removes a closed connection; drops the session when it was the user's last here,
   * unless it owes a rotation or its read in flight is still to be judged ({@link #owing}).
   */
  detach(user: string, connId: string): void {
    this.#owners.delete(connId);
    const session = this.#sessions.get(user);
    if (session?.logout(connId)) {
      this.#sessions.delete(user);
      if (session.holdsAcks) this.#keepUntilAcksWritten(user, session);
      if ((session.owesRotation || session.readInFlight) && !this.#closing) this.#keepUntilSettled(user, session);
      else session.stopRetrying();
    }
  }

  /** Keeps `session` in {@link #owing} until its read is judged and no rotation is owed (or it is taken back). */
  #keepUntilSettled(user: string, session: UserSession): void {
    this.#owing.set(user, session);
    session.whenSettled(() => {
      if (this.#owing.get(user) === session) this.#owing.delete(user);
    });
  }

  /** Keeps `session` in {@link #leaving} until it holds no unwritten ack. */
  #keepUntilAcksWritten(user: string, session: UserSession): void {
    let kept = this.#leaving.get(user);
    if (kept === undefined) {
      kept = new Set();
      this.#leaving.set(user, kept);
    }
    kept.add(session);
    session.whenAcksWritten(() => {
      kept.delete(session);
      if (kept.size === 0 && this.#leaving.get(user) === kept) this.#leaving.delete(user);
    });
  }

  /**
   * Writes the ack cursors this node holds for `user` (its session's, and those of a
   * session it left with acks unwritten), for a connection about to read the cursors.
   * Never rejects: a write that fails is kept for its retry.
   */
  async flushAcks(user: string): Promise<void> {
    const current = this.#sessions.get(user);
    const held = [...this.#leaving.get(user) ?? [], ...(current === undefined ? [] : [current])];
    await Promise.all(held.map((s) => s.flushAcks()));
  }

  /**
   * An append for `user` happened (at `seq`, as MsgID `id`, when known): wake its session
   * if it is here. One kept with no connection ({@link #owing}) is told too when the
   * MsgID is known: the seq is checked against what its machine knows and its read in
   * flight (machine.ts `notify`); it starts no read for nobody.
   */
  notify(user: string, seq?: number, id?: string): void {
    const session = this.#sessions.get(user) ?? (id === undefined ? undefined : this.#owing.get(user));
    session?.notify(seq, id);
  }

  /**
   * A local append for `user` (its entry, epoch and record): hand it to its session if
   * it is here, or kept with no connection ({@link #owing}: the append is checked against
   * the seqs its machine knows, and against the read in flight, machine.ts `offer`).
   */
  offer(user: string, entry: InboxEntry, epoch: string, record: StoredMessage): void {
    (this.#sessions.get(user) ?? this.#owing.get(user))?.offer(entry, epoch, record);
  }

  /**
   * Closes every connection (shutdown: 1001); their sessions keep what acks they hold
   * ({@link flushAll}). Rotations still owed are given up: lost with the process.
   */
  closeAll(code: number, reason: string): void {
    this.#closing = true;
    for (const s of this.#owing.values()) s.stopRetrying();
    this.#owing.clear();
    for (const s of this.#sessions.values()) for (const c of s.connections) c.close(code, reason);
  }

  /**
   * Writes every ack cursor this node holds (shutdown, after {@link closeAll}). Never
   * rejects.
   * @returns the users whose cursors are still unwritten (the write failed: Redis down)
   */
  async flushAll(): Promise<string[]> {
    const leaving = [...this.#leaving.values()].flatMap((kept) => [...kept]);
    const all = [...this.#sessions.values(), ...leaving];
    await Promise.all(all.map((s) => s.flushAcks()));
    return [...new Set(all.filter((s) => s.holdsAcks).map((s) => s.user))];
  }
}
