/**
 * The per-user machine's reads of the inbox (machine.ts, DESIGN.md §5): at most one
 * fetch in flight per user, what that fetch was for, and the pull asked for meanwhile.
 * An event during a fetch marks the cycle dirty; the machine fetches again when the
 * fetch ends. Which connection a fetch reads for: pull-target.ts (this class is the
 * {@link PullAsk} it reads). No I/O: the machine turns its answers into effects.
 */
import type { InboxEntry } from '../inbox/inbox.js';
import type { Conn } from './connection-state.js';
import { DEFAULT_PAGE_MAX, type Effect, type MachineConfig } from './effects.js';
import { anyWantsBeside, pullTarget, type PullAsk } from './pull-target.js';
import { joinCursor } from './resume.js';
import { SeqNames } from './seq-names.js';

/** What the fetch that just ended was for ({@link FetchCycle.end}). */
export interface FetchEnd {
  /** The seq it read after (0 when none was in flight). */
  readonly after: number;
  /** Entries it asked for: a page with fewer holds every entry up to its latest seq. */
  readonly limit: number;
  /**
   * Connections that logged in while it ran: its page may predate what their device was
   * sent elsewhere, so it neither rotates the epoch for them nor resets them (they wait
   * for the next fetch, which login asked for); the others join on it.
   */
  readonly late: ReadonlySet<string> | undefined;
  /**
   * Appends offered while it ran under the machine's epoch (machine.ts `offer`), or
   * notified with their MsgID (another node's: machine.ts `notify`), above its start: which message each of the last 64 of their seqs names
   * (seq-names.ts; {@link FetchCycle.offered}). Its page naming another message at one
   * of them proves that Redis lost writes (epoch-guard.ts `judge`). Undefined when none.
   */
  readonly offers: Pick<SeqNames, 'namesOther'> | undefined;
  /**
   * The epoch of {@link offers}: the machine's, or, during the machine's first fetch
   * (no epoch known yet), that of the first append offered then. Only a page of that
   * epoch is judged against them.
   */
  readonly offersEpoch: string | undefined;
  /**
   * It was an offered append's deferred delivery (machine.ts `offer`): its page holds
   * that one entry, not the inbox from its start, so no connection joins on it.
   */
  readonly offered: boolean;
}

/** One user's fetch cycle; owned by its machine. See the module comment. */
export class FetchCycle implements PullAsk {
  readonly window: number;
  /** Entries per fetch: a window's worth, at most the page bound. */
  readonly fetchLimit: number;
  /** Highest seq known to exist. */
  #latest = 0;
  /** The fetch in flight: its start, or undefined. */
  #after: number | undefined;
  /** The entries the fetch in flight asked for. */
  #limitAsked = 0;
  /** An event arrived during the fetch: fetch again when it ends. */
  #dirty = false;
  /** A heartbeat asked to pull even though nothing is known to be new. */
  #force = false;
  /**
   * A pull a full window reads for too (one entry, to see a new epoch): a heartbeat, a
   * rotation, an append of another epoch; and `#reusedFrom`, the lowest seq a notify
   * named that was not new, for a full window sent it (judged at the pull: a fetch in
   * flight may yet deliver it from the inbox as it was). Not every late notify.
   */
  #probe = false;
  #reusedFrom: number | undefined;
  #clock = 0;
  /**
   * What came while the fetch in flight ran ({@link FetchEnd} `late` and `offers`); made
   * on the first such event and dropped when the fetch ends, so an idle user holds none.
   */
  #during: { late?: Set<string>; offers?: SeqNames; offersEpoch?: string } | undefined;
  /** {@link FetchEnd} `offered` of the fetch in flight. */
  #offered = false;

  constructor(config: Pick<MachineConfig, 'window' | 'pageMax'>) {
    this.window = config.window;
    this.fetchLimit = Math.min(config.window, config.pageMax ?? DEFAULT_PAGE_MAX);
  }

  get latest(): number {
    return this.#latest;
  }

  get force(): boolean {
    return this.#force;
  }

  get probe(): boolean {
    return this.#probe;
  }

  get reusedFrom(): number | undefined {
    return this.#reusedFrom;
  }

  /** True while a fetch is in flight. */
  get inFlight(): boolean {
    return this.#after !== undefined;
  }

  /** Whether an event during the fetch in flight asked for another fetch. */
  get dirty(): boolean {
    return this.#dirty;
  }

  /** Connection `conn` logged in: during a fetch, it does not join on that fetch's page ({@link FetchEnd} `late`). */
  joined(conn: string): void {
    if (this.#after !== undefined) ((this.#during ??= {}).late ??= new Set()).add(conn);
  }

  /**
   * An append offered under the machine's epoch (machine.ts `offer`), or notified with
   * its MsgID (machine.ts `notify`, the machine's epoch taken for it): while a fetch is in
   * flight, its seq and MsgID are kept for that fetch's page to be judged against
   * ({@link FetchEnd} `offers`): a page read before Redis lost writes, answered after
   * appends here took the lost seqs again, names the lost messages there (a model
   * review's S1). Every seq after the fetch's start counts: a page of an inbox trimmed
   * past that start holds the entries from its first retained seq (delivfix2 model
   * seeds 1484 and 1748: the lost ones well above the start plus the entries asked for),
   * and its newest entry is its latest. They are kept as the guard keeps the seqs it
   * knows (seq-names.ts: the highest exactly, the 63 below by a
   * hash; 0.45 KiB), made on the first one and dropped when the fetch ends, so an idle
   * user holds none — and of one epoch: `epoch`, the machine's, or during its first
   * fetch (none known yet) the first one offered, others then left out. O(1) per offer.
   * @returns true when an append offered earlier in the same fetch named another message
   *   at that seq: Redis lost that one (a seq names one message under one epoch)
   */
  offered(entry: Pick<InboxEntry, 'seq' | 'id'>, epoch: string): boolean {
    const after = this.#after;
    if (after === undefined || entry.seq <= after) return false;
    const during = (this.#during ??= {});
    if ((during.offersEpoch ??= epoch) !== epoch) return false;
    const offers = during.offers;
    if (offers === undefined) {
      during.offers = new SeqNames(entry.seq, entry.id);
      return false;
    }
    const other = offers.namesOther(entry.seq, entry.id);
    offers.record(entry.seq, entry.id);
    return other;
  }

  /**
   * A notify of an append, of `seq` when known. A fetch in flight may have read its page
   * before this append: when it ends, it must not set the latest seq back below `seq`
   * ({@link pageRead}). No seq, or one not new: a pull is asked for anyway. It is a late
   * notify (one cheap fetch) or an inbox restored or recreated, whose appends reuse old
   * seqs: unpulled, they would wait for a heartbeat, or be skipped once appends passed
   * the old latest (DESIGN.md §11).
   * @returns true when `seq` was not new: what was read ahead is to be read again
   */
  notified(seq?: number): boolean {
    if (this.#after !== undefined) this.#dirty = true;
    if (seq !== undefined && seq > this.#latest) {
      this.#latest = seq;
      return false;
    }
    this.#force = true;
    if (seq === undefined) {
      this.#probe = true;
      return false;
    }
    this.#reusedFrom = Math.min(this.#reusedFrom ?? seq, seq);
    return true;
  }

  /** Asks to pull even if nothing is known to be new; with `probe`, a full window reads too. */
  askPull(probe = false): void {
    this.#force = true;
    if (probe) this.#probe = true;
  }

  /** Asks that the next pull read for a full window too (an append of another epoch: its seq may be past the old latest). */
  askProbe(): void {
    this.#probe = true;
  }

  /**
   * An offered append of `seq` taken as a fetch of that one entry (machine.ts `offer`),
   * answered now or, `deferred`, in a later turn: until then it counts as a fetch in
   * flight, and `seq`, known to exist as once delivered, is the latest (a notify of it
   * meanwhile is a late one).
   * @returns the fetch it stands for
   */
  startOffer(seq: number, deferred: boolean): { afterSeq: number; limit: number } {
    this.#after = seq - 1;
    this.#limitAsked = 2;
    if (deferred) {
      this.#latest = seq;
      this.#offered = true;
    }
    return { afterSeq: this.#after, limit: this.#limitAsked };
  }

  /** The fetch in flight ended (its page came, or it failed): what it was for. The dirty mark stays. */
  end(): FetchEnd {
    const during = this.#during;
    const ended: FetchEnd = {
      after: this.#after ?? 0, limit: this.#limitAsked, late: during?.late, offers: during?.offers, offersEpoch: during?.offersEpoch, offered: this.#offered,
    };
    this.#after = undefined;
    this.#during = undefined;
    this.#offered = false;
    return ended;
  }

  /** The fetch in flight failed: it ends, and the dirty mark with it (the driver retries with a heartbeat). */
  failed(): void {
    this.end();
    this.#dirty = false;
  }

  /** A fetched page's latest seq is the truth as of the fetch; a notify during it (dirty) may be newer. */
  pageRead(latestSeq: number): void {
    this.#latest = this.#dirty ? Math.max(latestSeq, this.#latest) : latestSeq;
  }

  /**
   * Whether to pump once a fetch's page was delivered: it moved something
   * (`progressed`), an event came during it, or a connection at a cursor other than the
   * fetch's start (`after`) wants one (this one's closed or paused since). A fetch that
   * moved nothing does not loop otherwise: the next event pulls. Clears the dirty mark
   * when it answers yes.
   */
  fetchAgain(progressed: boolean, conns: Iterable<Conn>, after: number): boolean {
    if (!progressed && !this.#dirty && !anyWantsBeside(conns, this, after)) return false;
    this.#dirty = false;
    return true;
  }

  /**
   * The fetch to start now, for the connection pullTarget picks, marked served. None
   * when no connection wants one (every window full, or paused: a pull asked for stays
   * asked for, made when a connection wants one again, an ack freeing its window); none
   * either while a fetch is in flight or `blocked` (a rotation in flight), the cycle then
   * marked dirty.
   */
  next(conns: Iterable<Conn>, blocked: boolean): Effect | undefined {
    const target = pullTarget(conns, this);
    if (target === undefined) return undefined;
    if (this.#after !== undefined || blocked) {
      this.#dirty = true;
      return undefined;
    }
    target.servedAt = ++this.#clock;
    const afterSeq = target.phase === 'joining' ? joinCursor(target.resume) : target.sent;
    this.#after = afterSeq;
    this.#force = false;
    this.#probe = false;
    this.#reusedFrom = undefined;
    // A full window takes nothing from the page: one entry is enough to see the epoch.
    const full = target.phase === 'ready' && target.inflight.length >= this.window;
    return { kind: 'fetch', afterSeq, limit: (this.#limitAsked = full ? 1 : this.fetchLimit) };
  }
}
