/**
 * The I/O around one user's delivery state machine (DESIGN.md §5): performs its
 * effects — inbox reads with their content, retried after a back-off when they fail
 * (retry-backoff.ts), frames written to connections (send-frame.ts), ack cursors held
 * for the node's write rounds (ack-cursors.ts), redelivery timers, epoch rotations
 * (their lines: rotation-logs.ts), closes — and feeds the results back as events.
 * The decisions all live in machine.ts; this file only carries them out.
 */
import { outageFields } from '../errors.js';
import type { Inbox, InboxEntry, InboxPage } from '../inbox/inbox.js';
import { readEntryRecords } from './entry-records.js';
import type { Logger } from '../logger.js';
import type { RecordReader } from '../store/record-reader.js';
import type { StoredMessage } from '../store/record.js';
import type { ReadRecord } from '../store/message-store.js';
import { ById } from './by-id.js';
import { UserMachine, type Effect, type MachineConfig, type ResumeRequest } from './machine.js';
import type { AckRounds } from './ack-rounds.js';
import { AckCursors } from './ack-cursors.js';
import type { DeliveryConnection } from './delivery-connection.js';
import type { GapFrame } from './frames.js';
import { LazyTimers } from './lazy-timers.js';
import { nextTurn, turnSpent } from './send-turns.js';
import { sendFrame } from './send-frame.js';
import { RetryBackoff } from './retry-backoff.js';
import { logRotation } from './rotation-logs.js';
import { ackOutcome, type AckOutcome, type ByteRoom, type RotationCause, type RotationOutcome } from './effects.js';
import { RESUME_ROTATION_COOLDOWN_MS } from './epoch-guard.js';
import type { LogThrottle } from '../log-throttle.js';
import { StallLog } from './stall-log.js';

export type { DeliveryConnection } from './delivery-connection.js';

/**
 * Which read of a fetch failed: `inbox` the inbox page (Redis), `records` the content
 * of its messages (the local store, the node owning their partition, or the owner
 * lookup in Redis: src/cluster/store-router.ts).
 */
export type FetchRead = 'inbox' | 'records';

/** What a session needs. */
export interface SessionDeps {
  readonly inbox: Inbox;
  /** Message records, wherever their partition is (src/cluster/store-router.ts). */
  readonly store: RecordReader;
  readonly machine: MachineConfig;
  readonly logger: Logger;
  /**
   * Wait before pulling again after a failed fetch, ms; it doubles with each failure
   * in a row, up to `MAX_RETRY_FACTOR` times (retry-backoff.ts).
   */
  readonly retryMs: number;
  /** Counts inbox reads (metrics). */
  readonly onFetch?: () => void;
  /**
   * A live `msg` (the `live` mark of a `send` effect, effects.ts) was written on a
   * connection here: its message's `ts`, ms since the epoch (metrics: delivery lag).
   */
  readonly onLiveMsg?: (tsMs: number) => void;
  /**
   * An inbox `gap` frame was written on a connection here, as it went out (send-frame.ts;
   * metrics: the seqs devices were told they can no longer get). Called too for the
   * `undeliverable` gap sent in a `msg`'s place (send-frame.ts).
   */
  readonly onGap?: (gap: GapFrame) => void;
  /** Counts failed fetches by the read that failed (metrics). */
  readonly onFetchFailed?: (read: FetchRead) => void;
  /**
   * Called with true when delivery stalls (a fetch failed while connections are here),
   * false when it no longer does: a fetch succeeded, or the last connection here closed.
   */
  readonly onStalled?: (stalled: boolean) => void;
  /** Thins the node's `ack cursor write failed` warnings (one per user and retry in an outage); default: every one. */
  readonly ackFailureLog?: LogThrottle;
  /** Counts the device ack cursors each write settled (metrics; ack-cursors.ts). */
  readonly onAckWrites?: (written: number, failed: number) => void;
  /**
   * Thins the node's `delivery fetch failed` warnings (every failed pull of every user
   * asks it, so a stall that goes on is logged again at its pace: stall-log.ts); default: every one.
   */
  readonly fetchFailureLog?: LogThrottle;
  /**
   * Thins the node's warnings of epoch rotations asked for by a device's `last_seq` (each
   * user's at most once per cool-down, but a script may loop over many users); default: every one.
   */
  readonly resumeRotationLog?: LogThrottle;
  /** Thins the node's lines of resume claims the cool-down kept from rotating (a client's loop: several a second); default: every one. */
  readonly resumeKeptLog?: LogThrottle;
  /** A rotation of `user`'s inbox was made here (any cause): other nodes are to read it now (gateway rotation-wake.ts). Never throws. */
  readonly onRotated?: (user: string) => void;
}

/** One locally connected user: its machine and its connections. */
export class UserSession {
  readonly user: string;
  readonly #deps: SessionDeps;
  readonly #machine: UserMachine;
  /** The user's connections here, by id (by-id.ts: most users have one). */
  readonly #conns = new ById<DeliveryConnection>();
  /** Redelivery timers by connection (lazy-timers.ts: an ack does not re-create one); made on first use. */
  #timers: LazyTimers<string> | undefined;
  /** The node's ack-write rounds, which the user's cursors join while held. */
  readonly #ackRounds: AckRounds;
  /** Ack cursors not yet written to Redis (ack-cursors.ts); made on the first ack. */
  #acks: AckCursors | undefined;
  /** The back-off after failed reads, and the stalled flag (retry-backoff.ts); made on the first failure. */
  #retry: RetryBackoff | undefined;
  /**
   * Set by {@link stopRetrying} (shutdown, or the session dropped by the hub): an owed
   * rotation is no longer retried with nobody here. Kept here, not in {@link #retry},
   * so that the stop builds no back-off for a session that never failed.
   */
  #retryStopped = false;
  /** Called once no rotation is owed or in flight and no read is in flight ({@link whenSettled}). */
  #onSettled: (() => void) | undefined;

  /** @param ackRounds the node's ack-write rounds (ack-rounds.ts), shared by its sessions */
  constructor(user: string, deps: SessionDeps, ackRounds: AckRounds) {
    this.user = user;
    this.#deps = deps;
    this.#ackRounds = ackRounds;
    this.#machine = new UserMachine(user, deps.machine);
  }

  /** Connections of this user on this node. */
  get connections(): readonly DeliveryConnection[] {
    return [...this.#conns];
  }

  /** The state machine (read-only use: cursors for reports and tests). */
  get machine(): UserMachine {
    return this.#machine;
  }

  /** login */
  login(conn: DeliveryConnection, resume: ResumeRequest): void {
    this.#conns.set(conn);
    // Pages to it are cut by bytes only when it says what it may be written (effects.ts `ByteRoom`).
    this.#run(this.#machine.login(conn.id, conn.device, resume, conn.byteAllowance === undefined ? undefined : conn as ByteRoom));
  }

  /** logout; returns true when the user has no connection left here. */
  logout(connId: string): boolean {
    this.#setTimer(connId, null);
    this.#conns.delete(connId);
    this.#run(this.#machine.logout(connId));
    if (this.#conns.size > 0) return false;
    // A rotation owed is still retried with nobody here ({@link owesRotation}); it alone
    // must not keep the process alive. Nobody is waiting here any more: not a stalled
    // user of this node.
    this.#retry?.leftAlone(this.owesRotation);
    void this.flushAcks();
    return true;
  }

  /**
   * True while an epoch rotation is in flight, or owed after one the node's deliveries
   * proved failed (epoch-guard.ts). Such a session outlives its last connection: it goes
   * on retrying after the back-off of a failed read until the rotation is made, since
   * nothing else remembers the loss it proved (docs/decisions.md "Redis with less than
   * it had"); the hub keeps it meanwhile (hub.ts `#owing`).
   */
  get owesRotation(): boolean {
    return this.#machine.rotationPending;
  }

  /**
   * True while a read of the inbox is in flight (machine.ts `reading`). Its page may
   * prove that Redis lost writes even after the user's last connection here closed: it
   * is judged against the seqs the node knows (epoch-guard.ts `judge`), and the rotation
   * it then asks for is made with nobody here. The hub keeps such a session until it is
   * judged (hub.ts `#owing`): dropped, the proof was lost, and a device back at once with
   * its `last_seq` was judged only by a later read, which appends may have passed again.
   */
  get readInFlight(): boolean {
    return this.#machine.reading;
  }

  /**
   * Calls `fn` once, when neither {@link owesRotation} nor {@link readInFlight} holds
   * any more, after a rotation's or a read's answer (not at once).
   */
  whenSettled(fn: () => void): void {
    this.#onSettled = fn;
  }

  /** Calls the {@link whenSettled} callback once nothing is owed or in flight. */
  #settle(): void {
    if (this.owesRotation || this.readInFlight) return;
    const settled = this.#onSettled;
    this.#onSettled = undefined;
    settled?.();
  }

  /** Shutdown: clears a retry armed with no connection here, and arms none again then. */
  stopRetrying(): void {
    this.#retryStopped = true;
    this.#retry?.stop(this.#conns.size === 0);
  }

  /**
   * ack from a client; `epoch`, when the client gave one, the epoch `seq` counts in (machine.ts `ack`).
   * @returns what it did: moved a cursor, refused (answered with an `error` frame), or nothing
   */
  ack(connId: string, seq: number, epoch?: string): AckOutcome {
    const effects = this.#machine.ack(connId, seq, epoch);
    this.#run(effects);
    return ackOutcome(effects);
  }

  /** notify: an append for this user happened (`seq`, and its MsgID `id`, when known: machine.ts `notify`). */
  notify(seq?: number, id?: string): void {
    this.#run(this.#machine.notify(seq, id));
  }

  /** offer: a local append for this user, with its record (machine.ts `offer`). */
  offer(entry: InboxEntry, epoch: string, record: StoredMessage): void {
    // This turn has written its share (send-turns.ts): the machine still runs the epoch
    // guard's checks on the append (a reused seq is the only sign of some Redis losses),
    // and only its delivery waits for a later turn (#deliverLater), with no read.
    this.#run(this.#machine.offer(entry, epoch, record, turnSpent()));
  }

  /** heartbeat: pull in case a notify was lost. */
  heartbeat(): void {
    this.#run(this.#machine.heartbeat());
  }

  /** The socket passed its high-water mark. */
  pause(connId: string): void {
    this.#run(this.#machine.pause(connId));
  }

  /** The socket drained below its low-water mark. */
  drain(connId: string): void {
    this.#run(this.#machine.drain(connId));
  }

  /** Writes pending ack cursors now (shutdown, last logout). Never rejects. */
  flushAcks(): Promise<void> {
    return this.#acks?.flushAcks() ?? Promise.resolve();
  }

  /**
   * True while an ack cursor is held here unwritten: pending, being written, or kept
   * for a retry after a failed write.
   */
  get holdsAcks(): boolean {
    return this.#acks?.holds ?? false;
  }

  /**
   * Calls `fn` once, when {@link holdsAcks} turns false (at once if it is). The hub
   * keeps a session its user left while it holds acks, so a reconnect on this node
   * can write them before reading the cursors (hub.ts `flushAcks`).
   */
  whenAcksWritten(fn: () => void): void {
    if (this.#acks === undefined) fn();
    else this.#acks.whenWritten(fn);
  }

  #run(effects: readonly Effect[]): void {
    /** `msg` frames sent as gaps: the machine is told once this batch is done. */
    let unsendable: { conn: string; seq: number }[] | undefined;
    for (const e of effects) {
      switch (e.kind) {
        case 'send': {
          const conn = this.#conns.get(e.conn);
          if (conn === undefined) break;
          const gapOf = sendFrame(conn, e.frame, this.#deps.logger, this.user, this.#deps.onGap);
          if (gapOf !== undefined) (unsendable ??= []).push({ conn: e.conn, seq: gapOf });
          else if (e.live === true && e.frame.t === 'msg') this.#deps.onLiveMsg?.(e.frame.ts);
          break;
        }
        case 'fetch':
          if (e.offered === undefined) void this.#fetch(e.afterSeq, e.limit);
          else void this.#deliverLater(e.offered);
          break;
        case 'ack':
          (this.#acks ??= new AckCursors(this.user, this.#deps, this.#ackRounds)).hold(e.device, { seq: e.seq, epoch: e.epoch });
          break;
        case 'timer':
          this.#setTimer(e.conn, e.delayMs);
          break;
        case 'close':
          this.#conns.get(e.conn)?.close(e.code, e.reason);
          break;
        case 'hold':
          this.#conns.get(e.conn)?.hold?.(e.byBudget);
          break;
        case 'rotate-epoch':
          void this.#rotateEpoch(e.epoch, e.cause, e.readLatest);
          break;
      }
    }
    for (const u of unsendable ?? []) this.#run(this.#machine.undeliverable(u.conn, u.seq));
  }

  #setTimer(connId: string, delayMs: number | null): void {
    // Made on first use: an idle connection's session never arms one (bench:e2e case c).
    if (delayMs === null && this.#timers === undefined) return;
    this.#timers ??= new LazyTimers<string>((id) => this.#run(this.#machine.redeliveryDue(id)));
    this.#timers.set(connId, delayMs);
  }

  /**
   * The inbox came back from Redis with less than a connection was sent (DESIGN.md
   * §11): a new epoch for it, then the machine pulls and resets every connection. A
   * failure (Redis down, a timeout) is told to the machine as such and retried as a
   * failed fetch is, after the same back-off: the machine asks for a proven rotation
   * again at that heartbeat (its sign may have been an offered append no read shows
   * again); a resume claim's is dropped, and shown again by the claim's next read.
   * One made is told to the other nodes ({@link SessionDeps} `onRotated`).
   */
  async #rotateEpoch(epoch: string, cause: RotationCause, readLatest: number | undefined): Promise<void> {
    const { logger } = this.#deps;
    let outcome: RotationOutcome = 'failed';
    try {
      // Only a device's claim can be the client's mistake: such rotations have a cool-down.
      const after = cause === 'resume'
        ? await this.#deps.inbox.rotateEpoch(this.user, epoch, RESUME_ROTATION_COOLDOWN_MS, readLatest)
        : await this.#deps.inbox.rotateEpoch(this.user, epoch, 0);
      outcome = after === epoch ? 'kept' : 'made';
      logRotation(this.#deps, { user: this.user, epoch, newEpoch: after }, cause);
    } catch (err) {
      // Counted with failed fetches: one streak of an outage, one back-off.
      const failures = this.#backoff().rotationFailed();
      const context = { ...outageFields(err), user: this.user, epoch, cause, failures };
      if (failures === 1) logger.warn(context, 'inbox epoch rotation failed, will retry');
      else logger.debug(context, 'inbox epoch rotation failed, will retry');
    }
    const effects = this.#machine.epochRotated(outcome);
    if (outcome === 'failed') this.#retryLater();
    else if (outcome === 'made') this.#deps.onRotated?.(this.user);
    this.#run(effects);
    this.#settle();
  }

  /**
   * An offered append's delivery the machine deferred (a `fetch` effect with its answer,
   * machine.ts `offer`): given back in the first turn with room (send-turns.ts), after
   * those that waited before it. Nothing is read: for the machine it is a fetch in
   * flight until then.
   */
  async #deliverLater(offered: { readonly page: InboxPage; readonly records: readonly ReadRecord[] }): Promise<void> {
    await nextTurn();
    this.#run(this.#machine.fetched(offered.page, offered.records));
    this.#settle();
  }

  async #fetch(afterSeq: number, limit: number): Promise<void> {
    let effects: Effect[];
    this.#deps.onFetch?.();
    let read: FetchRead = 'inbox';
    try {
      const page = await this.#deps.inbox.range(this.user, afterSeq, limit);
      // Only for a page that resets a connection to another epoch (rare): what the
      // device had is marked in the gap after its `reset` (src/inbox/lineage.ts).
      const lineage = this.#machine.wantsLineage(page) ? await this.#deps.inbox.lineage(this.user) : undefined;
      read = 'records';
      // Entries whose own expiry passed are not read (entry-records.ts): a gap, owner down or not.
      const records = await readEntryRecords(this.#deps.store, page.entries, (this.#deps.machine.now ?? Date.now)());
      // Still in flight for the machine while it waits for a turn with room (send-turns.ts).
      if (turnSpent()) await nextTurn();
      effects = this.#machine.fetched(page, records, lineage);
      this.#retry?.succeeded();
    } catch (err) {
      // Nothing is skipped or closed: the machine fetches the same seqs again on the
      // next pull (Redis down, or a record's owning node unreachable: DESIGN.md §9).
      // The wait doubles from retryMs up to MAX_RETRY_FACTOR × retryMs; a notify or a
      // heartbeat in the meantime pulls at once. Logged thinned across the node's
      // users, at its pace for as long as the stall lasts (stall-log.ts). Its last
      // connection closed while the read ran: nobody waits, no retry (#retryLater).
      this.#backoff().fetchFailed(err, this.#conns.size === 0);
      this.#deps.onFetchFailed?.(read);
      effects = this.#machine.fetchFailed();
      this.#retryLater();
    }
    this.#run(effects);
    this.#settle();
  }

  /** After a failed read or epoch rotation: a heartbeat later (retry-backoff.ts `later`), while a connection is here or a rotation is owed. */
  #retryLater(): void {
    this.#backoff().later(this.#conns.size === 0, this.owesRotation && !this.#retryStopped);
  }

  #backoff(): RetryBackoff {
    this.#retry ??= new RetryBackoff(this.#deps.retryMs, () => this.heartbeat(), this.#deps.onStalled,
      new StallLog(this.user, this.#deps.logger, this.#deps.fetchFailureLog));
    return this.#retry;
  }
}
