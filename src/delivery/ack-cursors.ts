/**
 * One user's ack cursors on their way to Redis (DESIGN.md §5: an ack moves the
 * device's cursor at once in the machine, and is persisted coalesced, at most every
 * 100 ms per user). A held cursor joins the node's next write round (ack-rounds.ts); a
 * write that fails keeps its cursors for a retry after `retryMs`, under any cursor
 * acked meanwhile (docs/protocol.md: acks whose write failed are kept and written
 * first). Made by the session on the user's first ack: an idle connection keeps none.
 */
import type { Inbox } from '../inbox/inbox.js';
import type { Logger } from '../logger.js';
import type { AckFlushable, AckRounds } from './ack-rounds.js';
import { EVERY_LINE, thinnedFields, type LogThrottle } from '../log-throttle.js';
import { outageFields } from '../errors.js';

/**
 * The warning of a failed ack-cursor write (docs/api.md, 503 row): with the `user`,
 * `devices` (how many of its cursors failed), the `reason` and its `cause`, and
 * `notLogged`; thinned across the node, the lines left out at debug.
 */
export const ACK_WRITE_FAILED_LOG = 'ack cursor write failed, will retry';

/** An ack cursor waiting to be written. */
export interface PendingAck {
  readonly seq: number;
  /** The inbox epoch it counts in; undefined: not known (written unchecked). */
  readonly epoch: string | undefined;
}

/** What the cursors of a user need (the session's deps: session.ts `SessionDeps`). */
export interface AckCursorDeps {
  readonly inbox: Inbox;
  readonly logger: Logger;
  /** Wait before a failed write joins a round again, ms. */
  readonly retryMs: number;
  /** Thins the node's `ack cursor write failed` warnings; default: every one. */
  readonly ackFailureLog?: LogThrottle;
  /** Counts the device cursors each write settled: `written` succeeded, `failed` did not (metrics). */
  readonly onAckWrites?: (written: number, failed: number) => void;
}

/** The ack cursors of one user held on this node and not yet written to Redis. */
export class AckCursors implements AckFlushable {
  readonly #user: string;
  readonly #deps: AckCursorDeps;
  readonly #rounds: AckRounds;
  /** device → highest acked seq not yet written, and its epoch; undefined while none is held. */
  #pending: Map<string, PendingAck> | undefined;
  /** Pending after a failed write: the next round is joined after `retryMs`. */
  #retryTimer: NodeJS.Timeout | undefined;
  /** The last write, chained; undefined while none is in flight. */
  #flush: Promise<void> | undefined;
  /** Writes started and not yet settled. */
  #writes = 0;
  /** Called once nothing is held, in flight or waiting for a retry ({@link whenWritten}). */
  #onWritten: (() => void) | undefined;

  /** @param rounds the node's ack-write rounds, shared by its users */
  constructor(user: string, deps: AckCursorDeps, rounds: AckRounds) {
    this.#user = user;
    this.#deps = deps;
    this.#rounds = rounds;
  }

  /** Holds `ack` for `device` for the next round of writes (a retry's, after a failure). */
  hold(device: string, ack: PendingAck): void {
    const pending = (this.#pending ??= new Map());
    const held = pending.get(device);
    // A newer epoch replaces whatever was held; within one epoch the cursor only grows.
    if (held === undefined || held.epoch !== ack.epoch || held.seq < ack.seq) pending.set(device, ack);
    if (this.#retryTimer === undefined) this.#rounds.add(this);
  }

  /** Writes the held cursors now (a round, shutdown, last logout). Never rejects. */
  flushAcks(): Promise<void> {
    this.#rounds.delete(this);
    clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    const batch = this.#pending;
    if (batch !== undefined) {
      this.#pending = undefined;
      // Chained: writes of one user stay in order, and a caller waits for all before it.
      this.#writes += 1;
      this.#flush = (this.#flush ?? Promise.resolve()).then(() => this.#write(batch)).finally(() => {
        this.#writes -= 1;
        // The last in the chain: nothing to keep (callers hold the promise they were given).
        if (this.#writes === 0) this.#flush = undefined;
        this.#checkWritten();
      });
    }
    return this.#flush ?? Promise.resolve();
  }

  /** True while a cursor is held unwritten: pending, being written, or kept for a retry. */
  get holds(): boolean {
    return this.#pending !== undefined || this.#writes > 0 || this.#retryTimer !== undefined;
  }

  /** Calls `fn` once, when {@link holds} turns false (at once if it is). */
  whenWritten(fn: () => void): void {
    this.#onWritten = fn;
    this.#checkWritten();
  }

  #checkWritten(): void {
    if (this.#onWritten === undefined || this.holds) return;
    const fn = this.#onWritten;
    this.#onWritten = undefined;
    fn();
  }

  async #write(batch: ReadonlyMap<string, PendingAck>): Promise<void> {
    const failed = await this.#firstFailure(batch);
    if (failed === undefined) return;
    // Keep them for a later round; a cursor only grows, so writing again is harmless.
    // Older than anything held now (acked while the write ran): a held cursor of
    // another epoch (the inbox was reset meanwhile) is newer and stays.
    for (const [device, a] of batch) this.#restore(device, a);
    this.#retryTimer ??= setTimeout(() => {
      this.#retryTimer = undefined;
      this.#rounds.add(this);
    }, this.#deps.retryMs).unref();
    // An outage's warning, as its siblings (delivery pulls, renewals): the reason and
    // its cause, no stack, `notLogged` after lines the thinning left out (those at debug).
    const context = { user: this.#user, devices: failed.devices, ...outageFields(failed.err) };
    const left = (this.#deps.ackFailureLog ?? EVERY_LINE).take();
    if (left === undefined) this.#deps.logger.debug(context, ACK_WRITE_FAILED_LOG);
    else this.#deps.logger.warn({ ...context, ...thinnedFields(left) }, ACK_WRITE_FAILED_LOG);
  }

  /**
   * Writes each device's cursor of `batch`; answers the first write's failure and how
   * many failed, or undefined when every write succeeded. One device (a user on one
   * connection, the common case) takes no arrays and no `allSettled` results: ~3 % of
   * what the live path allocated (bench/README.md).
   */
  async #firstFailure(batch: ReadonlyMap<string, PendingAck>): Promise<{ err: unknown; devices: number } | undefined> {
    if (batch.size === 1) {
      for (const [device, a] of batch) {
        try {
          await this.#deps.inbox.ack(this.#user, device, a.seq, a.epoch);
        } catch (err) {
          this.#deps.onAckWrites?.(0, 1);
          return { err, devices: 1 };
        }
      }
      this.#deps.onAckWrites?.(1, 0);
      return undefined;
    }
    const results = await Promise.allSettled(
      [...batch].map(([device, a]) => this.#deps.inbox.ack(this.#user, device, a.seq, a.epoch)));
    const failures = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    this.#deps.onAckWrites?.(results.length - failures.length, failures.length);
    const first = failures[0];
    return first === undefined ? undefined : { err: first.reason, devices: failures.length };
  }

  /** Holds again an ack whose write failed, unless one acked since (any epoch) supersedes it. */
  #restore(device: string, ack: PendingAck): void {
    const pending = (this.#pending ??= new Map());
    const held = pending.get(device);
    if (held === undefined || (held.epoch === ack.epoch && held.seq < ack.seq)) pending.set(device, ack);
  }
}
