/**
 * The per-user delivery state machine (DESIGN.md §5), with no I/O.
 *
 * One machine per locally connected user holds the cursor of each of that user's
 * local connections. Events (login, heartbeat, notify, ack, drain, logout, a finished
 * fetch, a redelivery timer) go in; effects come out: fetch the inbox after a seq,
 * send a frame on a connection, persist an ack cursor, arm a timer, close a
 * connection. The driver (session.ts) performs the effects and feeds results back.
 *
 * Rules kept here:
 * - At most one fetch in flight per user. An event during a fetch marks the machine
 *   dirty; it fetches again when the current fetch ends (fetch-cycle.ts). Connections
 *   at the same cursor share one fetch (which one it reads for: pull-target.ts), and
 *   what a page held beyond a connection's window is kept for it (read-ahead.ts, served
 *   by page-delivery.ts): it fetches again only past that.
 * - A connection has at most `window` unacked messages; acks pace delivery.
 * - Frames go out in seq order per connection; a message is sent twice on one
 *   connection only as a redelivery, marked `redelivered`, or after a `reset`: marked
 *   when the new epoch goes on from the old one's numbering and the seq is known to
 *   name the same message (resent-marks.ts), else not (a client dedupes by `id`).
 * - Redelivery after `ackTimeoutMs` without ack progress, then after each wait in
 *   `backoffMs`; after the last wait, close 4008. None while paused: a drain starts the
 *   wait under way over.
 * - Resume on login with `gap` and `reset` (DESIGN.md §5 "Resume rules"); content
 *   that expired or vanished is a `gap` of its seq, never an empty message or a stall.
 * - A user whose inbox epoch changed is reset on every connection. One whose latest
 *   seq fell below what a connection was sent (Redis gave the inbox back with less,
 *   same epoch) first gets a new epoch (`rotate-epoch`: every device with a cursor of
 *   the old one is reset, offline ones too); no fetch starts until `epochRotated`,
 *   whose pull resets them all (DESIGN.md §11). One only a joining device's `last_seq`
 *   shows may be refused (cool-down, epoch-guard.ts): that device alone is reset. A
 *   proven one that fails is asked for again at the next heartbeat, no fetch before.
 */
import type { InboxEntry, InboxPage } from '../inbox/inbox.js';
import type { EpochLineage } from '../inbox/lineage.js';
import type { ReadRecord, StoredMessage } from '../store/message-store.js';
import type { ByteRoom, Effect, MachineConfig, RotationOutcome } from './effects.js';
import { ById } from './by-id.js';
import { applyAck, type Conn } from './connection-state.js';
import { anyJoining, resetsFromEpoch } from './conn-queries.js';
import { endRoundIfIdle, redeliveryRound, restartedWait } from './redelivery-rounds.js';
import { EpochGuard } from './epoch-guard.js';
import { FetchCycle } from './fetch-cycle.js';
import { PageDelivery } from './page-delivery.js';
import type { ResumeRequest } from './resume.js';

export type { ResumeRequest } from './resume.js';

export { DEFAULT_PAGE_MAX, type ByteRoom, type Effect, type MachineConfig, type PageAllowance, type RotationOutcome } from './effects.js';

/** One user's delivery state machine. See the module comment for its rules. */
export class UserMachine {
  readonly user: string;
  readonly #config: MachineConfig;
  /** Its connections here, by id (by-id.ts: most users have one). */
  readonly #conns = new ById<Conn>();
  /** The inbox epoch as last seen; undefined before the first fetch. */
  #epoch: string | null | undefined = undefined;
  /** The fetch in flight, the pull asked for and the highest seq known to exist (fetch-cycle.ts). */
  readonly #cycle: FetchCycle;
  /** Whether Redis gave the inbox back with less, and the new epoch asked for then (epoch-guard.ts). */
  readonly #guard = new EpochGuard();
  /** What is sent from the pages read, and what was read ahead of the windows (page-delivery.ts). */
  readonly #delivery: PageDelivery;

  constructor(user: string, config: MachineConfig) {
    this.user = user;
    this.#config = config;
    this.#cycle = new FetchCycle(config);
    this.#delivery = new PageDelivery(user, config, this.#cycle.fetchLimit, this.#guard);
  }

  /** Number of connections. */
  get size(): number {
    return this.#conns.size;
  }

  /** True while a `rotate-epoch` is in flight, or owed after a proven one failed (epoch-guard.ts `rotating`). */
  get rotationPending(): boolean {
    return this.#guard.rotating;
  }

  /**
   * True while a fetch is in flight (an offered append's deferred delivery included):
   * its page may prove a loss (epoch-guard.ts `judge`) even when no connection is left,
   * so the session is kept until it is judged (hub.ts).
   */
  get reading(): boolean {
    return this.#cycle.inFlight;
  }

  /** A connection's cursors, for tests and presence reports. */
  cursor(conn: string): { acked: number; sent: number; inflight: number; paused: boolean } | undefined {
    const c = this.#conns.get(conn);
    return c && { acked: c.acked, sent: c.sent, inflight: c.inflight.length, paused: c.paused };
  }

  /**
   * login: a connection opens and asks to start at `resume`. Its `welcome` follows the next fetch.
   * @param room what a page to it may write (effects.ts `ByteRoom`); undefined: pages are cut at the window only
   */
  login(conn: string, device: string, resume: ResumeRequest, room?: ByteRoom): Effect[] {
    this.#conns.set({
      id: conn, device, room, phase: 'joining', resume, acked: 0, stored: 0, sent: 0, sendsAfter: 0, inflight: [],
      redeliverUpTo: 0, hadThrough: 0, resent: undefined, rounds: 0, paused: false, servedAt: 0, liveAfter: 0, epochUntold: false,
    });
    this.#cycle.joined(conn);
    return this.#pump();
  }

  /** logout: the connection closed. */
  logout(conn: string): Effect[] {
    this.#conns.delete(conn);
    return [];
  }

  /**
   * notify: an append happened; `seq` when known. No seq, or one not new: pull anyway
   * (fetch-cycle.ts `notified`); a seq not new may be an inbox restored or recreated,
   * whose appends reuse old seqs: what was read ahead is read again.
   * @param id the appended MsgID, when the notify names it (another node's append: the
   *   bus carries it). A seq known under the machine's epoch naming another message, or
   *   one the fetch in flight reads as another, proves that Redis gave the inbox back
   *   with less (as an offer's: {@link offer}), and a new epoch is asked for. The notify
   *   names no epoch: one of an inbox recreated or rotated since is the machine's old
   *   epoch gone all the same (the rotation asked for then finds another epoch, and
   *   the pull after it resets the connections to it).
   */
  notify(seq?: number, id?: string): Effect[] {
    const epoch = this.#epoch;
    if (seq !== undefined && id !== undefined && typeof epoch === 'string') {
      const rotation = this.#reusedSeq({ seq, id }, epoch);
      if (rotation !== undefined) return rotation;
    }
    if (this.#cycle.notified(seq)) this.#delivery.dropAhead();
    return this.#pump();
  }

  /**
   * Whether the append of `entry` under `epoch` shows the inbox lost writes: a seq known
   * under it (delivered, or read as the newest) naming another message, or one an
   * append offered or notified earlier in the fetch in flight named as another
   * (fetch-cycle.ts `offered`, which also keeps it for that fetch's page: a page read
   * before the loss names the lost messages at those seqs). Then a new epoch is asked
   * for: a fetch in flight read the old epoch, and what it brings is not delivered.
   * @returns the rotation's effects; undefined when it shows nothing, or a rotation was
   *   in flight already (a claim's, which Redis may refuse: it keeps the sign for its
   *   answer), the caller then going on as it would
   */
  #reusedSeq(entry: Pick<InboxEntry, 'seq' | 'id'>, epoch: string): Effect[] | undefined {
    if (!this.#guard.reuses(entry) && !this.#cycle.offered(entry, epoch)) return undefined;
    const inFlight = this.#guard.rotating;
    const effects: Effect[] = [];
    this.#guard.rotate(epoch, this.#cycle.inFlight, effects, 'delivered');
    this.#delivery.dropAhead();
    return inFlight ? undefined : effects;
  }

  /**
   * offer: a notify that carries the appended entry, its inbox epoch and its record (an
   * append made on this node). When the machine is exactly caught up with it — no fetch
   * in flight, no connection joining, the epoch as last fetched (or none, and this is
   * seq 1 of a new inbox), `entry.seq` right after the latest known — it is delivered
   * as a fetch of that one entry would, with no read; otherwise it is
   * `notify(entry.seq)` (docs/decisions.md "Local appends are delivered without a read").
   * The epoch guard's checks (a reused seq, an append of another epoch) run first
   * whatever `defer` says: they are the only place such a loss shows (DESIGN.md §11).
   * @param record the stored record of `entry.id` (what the store's getMany returns)
   * @param defer this turn of the event loop has written its share of frames
   *   (send-turns.ts): the delivery is not made now. Instead a `fetch` effect carries
   *   its answer (`offered`: no read), which the driver gives back as `fetched` in a
   *   later turn; until then the machine counts it as a fetch in flight, so an event in
   *   between marks it dirty as during any read, and per-connection order holds.
   */
  offer(entry: InboxEntry, epoch: string, record: StoredMessage, defer = false): Effect[] {
    // A seq known under this epoch (delivered, or read as the newest) now naming another
    // message: Redis gave the inbox back with less (DESIGN.md §11). A burst past the old
    // latest never lets a pull see it shrunken, but seqs are contiguous: one lands on
    // the highest seq known (the newest read: no lower than a connection's position
    // unless the top entries were deleted by hand). During a fetch, the append is also
    // kept for its page to be judged against (fetch-cycle.ts `offered`: a page read
    // before the loss names the lost messages at those seqs), and one offered earlier in
    // it at this seq as another message is the same sign. So it is during the first
    // fetch, with no epoch known yet (a session made by a connection that just came):
    // that page was read before the loss as much as any other.
    const known = epoch === this.#epoch || (this.#epoch === undefined && this.#cycle.inFlight);
    const rotation = known ? this.#reusedSeq(entry, epoch) : undefined;
    if (rotation !== undefined) return rotation;
    const sameInbox = this.#epoch === epoch || (this.#epoch === null && entry.seq === 1);
    // An append of another epoch: the inbox was recreated, whatever its seq; a full
    // window reads too, to be reset (its seq may be past the old latest: no pull else).
    if (typeof this.#epoch === 'string' && epoch !== this.#epoch) this.#cycle.askProbe();
    if (this.#cycle.inFlight || this.#guard.rotating || !sameInbox || entry.seq !== this.#cycle.latest + 1 || anyJoining(this.#conns)) {
      return this.notify(entry.seq);
    }
    const fetch = this.#cycle.startOffer(entry.seq, defer);
    const page: InboxPage = { epoch, firstSeq: entry.seq, latestSeq: entry.seq, entries: [entry], newest: entry };
    return defer ? [{ kind: 'fetch', ...fetch, offered: { page, records: [record] } }] : this.fetched(page, [record]);
  }

  /** heartbeat: pull even if nothing is known to be new (covers lost notifies); or ask again for an owed rotation. */
  heartbeat(): Effect[] {
    this.#cycle.askPull(true);
    // Read again what was read ahead: its content may have expired since (read-ahead.ts).
    this.#delivery.dropAhead();
    // A proven rotation that failed goes first: its pull comes after it (`epochRotated`).
    const again: Effect[] = [];
    return this.#guard.retry(this.#cycle.inFlight, again) ? again : this.#pump();
  }

  /** pause: the socket passed its high-water mark; send nothing more to it. */
  pause(conn: string): Effect[] {
    const c = this.#conns.get(conn);
    if (c) c.paused = true;
    return [];
  }

  /** drain: the socket went below its low-water mark; the wait for an ack starts over (redelivery-rounds.ts `restartedWait`). */
  drain(conn: string): Effect[] {
    const c = this.#conns.get(conn);
    if (!c || !c.paused) return [];
    c.paused = false;
    const wait = restartedWait(c, this.#config);
    return wait ? [wait, ...this.#pump()] : this.#pump();
  }

  /**
   * ack: the client acknowledged every seq up to `seq` (cumulative). An ack at or
   * below the connection's cursor moves nothing on it, but is stored as the device's
   * cursor when the connection started there (`from=latest`, `last_seq`, a `gap`) and
   * the client had not acked it yet: a plain reconnect then resumes after it; an ack
   * above the last seq sent is refused with an `error` frame and moves nothing. An ack
   * naming an `epoch` other than the inbox's now (sent before the client read a `reset`)
   * counts seqs of the inbox that is gone: it changes nothing, and is not refused.
   */
  ack(conn: string, seq: number, epoch?: string): Effect[] {
    const c = this.#conns.get(conn);
    if (!c || (epoch !== undefined && epoch !== this.#epoch)) return [];
    const outcome = applyAck(c, seq);
    if (outcome === 'stale') return [];
    if (outcome !== 'moved' && outcome !== 'store') return [{ kind: 'send', conn, frame: { t: 'error', code: 'INVALID_REQUEST', message: outcome.refused, ref: { t: 'ack', seq } } }];
    // The epoch travels with the ack: written after the inbox was recreated, an ack of
    // the old seqs would make the next resume skip new messages (ack-7.lua).
    const stored: Effect = { kind: 'ack', device: c.device, seq, epoch: this.#epoch ?? undefined };
    if (outcome === 'store') return [stored];
    const effects: Effect[] = [stored, { kind: 'timer', conn, delayMs: c.inflight.length > 0 ? this.#config.ackTimeoutMs : null }];
    return effects.concat(this.#pump());
  }

  /**
   * undeliverable: `seq`'s `msg` could not be serialised; a `gap` went instead
   * (session.ts). It leaves the window.
   */
  undeliverable(conn: string, seq: number): Effect[] {
    const c = this.#conns.get(conn);
    const at = c?.inflight.indexOf(seq) ?? -1;
    if (!c || at < 0) return [];
    c.inflight.splice(at, 1);
    const effects: Effect[] = endRoundIfIdle(c) ? [{ kind: 'timer', conn, delayMs: null }] : [];
    return effects.concat(this.#pump());
  }

  /** The connection's redelivery timer fired (redeliveryRound). */
  redeliveryDue(conn: string): Effect[] {
    const c = this.#conns.get(conn);
    if (!c || c.phase !== 'ready') return [];
    const effects: Effect[] = [];
    return redeliveryRound(c, this.#config, effects) ? effects.concat(this.#pump()) : effects;
  }

  /**
   * epochRotated: the `rotate-epoch` asked for was tried, with `outcome`; pulls at once,
   * unless it is asked for again (refused, a loss proven meanwhile) or owed (a proven
   * one `failed`: the next heartbeat asks again, epoch-guard.ts `retry`).
   */
  epochRotated(outcome: RotationOutcome): Effect[] {
    const again: Effect[] = [];
    this.#guard.rotated(outcome, again);
    if (this.#guard.rotating) return again;
    this.#cycle.askPull(true);
    this.#delivery.dropAhead();
    return this.#pump();
  }

  /** The fetch failed (Redis or the store down): the driver retries later with `heartbeat`. */
  fetchFailed(): Effect[] {
    this.#cycle.failed();
    this.#guard.fetchEnded();
    return [];
  }

  /**
   * True when delivering `page` resets a connection from an epoch the page's may go on
   * from (conn-queries.ts `resetsFromEpoch`): the driver then reads the epoch's
   * lineage and gives it to {@link fetched}, to mark what the device had in the `trimmed`
   * gap after the `reset`.
   */
  wantsLineage(page: InboxPage): boolean {
    return resetsFromEpoch(this.#conns, this.#epoch, page);
  }

  /**
   * The fetch ended: `page` is the inbox after its start, `records[i]`
   * `page.entries[i]`'s content (null: expired, missing; the unreadable mark: it cannot
   * be decoded).
   * @param lineage `page`'s epoch's lineage (src/inbox/lineage.ts), read when {@link
   *   wantsLineage} asked; undefined: unknown (a reset's whole trimmed gap is then news)
   */
  fetched(page: InboxPage, records: readonly (ReadRecord | null)[], lineage?: EpochLineage): Effect[] {
    const ended = this.#cycle.end();
    if (this.#guard.fetchEnded()) {
      // Read before a new epoch was asked for: its entries may name old-epoch seqs.
      this.#delivery.dropAhead();
      if (this.#guard.rotating) return [];
      this.#cycle.askPull();
      return this.#pump();
    }
    const effects: Effect[] = [];
    const told = this.#guard.judge(page, this.#epoch, this.#conns, ended, effects, lineage);
    if (this.#guard.rotating) {
      // Nothing from a page whose epoch is being replaced (`epochRotated` pulls again). But
      // an epoch its resets told is taken: else, were the rotation refused (a claim's, in
      // the cool-down), the pull after it would reset them again for the same change.
      if (told) this.#epoch = page.epoch;
      this.#delivery.dropAhead();
      return effects;
    }
    if (page.epoch !== this.#epoch) this.#guard.epochChanged();
    this.#epoch = page.epoch;
    this.#guard.read(page);
    this.#cycle.pageRead(page.latestSeq);
    this.#delivery.page(this.#conns, page, records, ended, effects, lineage);
    return this.#cycle.fetchAgain(effects.length > 0, this.#conns, ended.after) ? effects.concat(this.#pump()) : effects;
  }

  /** Serves what the read-ahead holds; then starts a fetch when one is needed and none is in flight (fetch-cycle.ts `next`). */
  #pump(): Effect[] {
    const effects: Effect[] = [];
    this.#delivery.serveAhead(this.#conns, effects);
    const fetch = this.#cycle.next(this.#conns, this.#guard.rotating);
    if (fetch !== undefined) effects.push(fetch);
    return effects;
  }
}
