/**
 * Whether a user's inbox came back from Redis with less than was delivered from it,
 * under the same epoch (a restored snapshot, a failover to a replica that was behind,
 * the last second of an `everysec` AOF lost with its machine: DESIGN.md §11), and the
 * new epoch the machine (machine.ts) then asks for with a `rotate-epoch` effect. The
 * lost seqs are assigned again to other messages, so every device holding a cursor of
 * the old epoch must be told `reset`; docs/decisions.md "Redis with less than it had".
 *
 * Two signs, both seen by the machine: a read whose latest seq is below what a
 * connection was sent, and a seq known to name a message under the epoch found naming
 * another one. The highest such seq the node knows is kept with its MsgID, and the
 * last {@link SEQ_NAMES} below it with a hash of theirs (seq-names.ts): one it
 * delivered (as a msg or a gap), or the inbox's newest entry as a read gave it
 * (`InboxPage.newest`, `range-3.lua`) — so a connection that was sent nothing yet,
 * whose position came from its `last_seq` or its stored cursor, is covered as one that
 * was delivered its messages live. A local append that lands on that seq as another
 * message shows it (a batch that passes the old latest before any read: seqs are
 * contiguous, so one of its appends lands there; before, only delivered seqs were
 * kept, and a device resumed at the old latest skipped the seqs assigned again up to
 * it with no `reset`), and so does a read whose newest entry is that seq naming another
 * message (appends made on another node, whose notify carries no MsgID, that end
 * there). A read's latest below that highest seq is the first sign too (not only below
 * what a connection was sent), and a page naming another message at the seq of an
 * append offered while it was read (fetch-cycle.ts `offered`: a page read before the
 * loss, answered after a batch here took the lost seqs again) is the second; so is an
 * epoch a rotation made here replaced, read again (a second loss undid it). This
 * module judges each page read for them ({@link EpochGuard.judge}, which also resets
 * connections under an epoch that changed), keeps what they need, and the state of
 * the rotation in flight.
 *
 * A third sign is a connecting device's `last_seq` above the latest under the inbox's
 * own epoch, which a client's mistake looks like too (one that keeps its old `last_seq`
 * after a `reset`, in a reconnect loop). The rotation it asks for is refused in Redis
 * while another one asked for so is younger than {@link RESUME_ROTATION_COOLDOWN_MS}
 * (`rotate-7.lua`); the epoch is then kept, and that device is reset alone. A sign of
 * the node's own deliveries that came while it was in flight proves the loss: the
 * rotation is then asked for again as such, which Redis never refuses.
 *
 * A rotation the node's deliveries proved whose call fails (Redis down, a timeout) is
 * owed: no fetch starts, and the next heartbeat asks for it again ({@link
 * EpochGuard.retry}; the session's retry timer, with its back-off, makes one, also
 * after the user's last connection on the node closed: hub.ts `#owing`). The sign may
 * have been an offered append that no read shows again (DESIGN.md §11).
 */
import type { InboxPage, PageEntry } from '../inbox/inbox.js';
import type { EpochLineage } from '../inbox/lineage.js';
import { resetTo, type Conn } from './connection-state.js';
import type { Effect, RotationCause, RotationOutcome } from './effects.js';
import type { FetchEnd } from './fetch-cycle.js';
import { resumesAboveLatest } from './resume.js';
import { SeqNames, SEQ_NAMES } from './seq-names.js';

/**
 * Least time between two rotations of one user's epoch asked for by a device's resume
 * claim (a `last_seq` above the latest under the inbox's epoch), on any node: each one
 * resets every device of the user and sends each its whole retained inbox again. A
 * claim within it resets only the claiming device (docs/decisions.md "Redis with less
 * than it had"; docs/protocol.md "Where delivery starts"). ms.
 */
export const RESUME_ROTATION_COOLDOWN_MS = 60_000;

/** One user's watch over its inbox epoch; owned by its machine. */
export class EpochGuard {
  #rotating = false;
  /** The fetch in flight when the rotation was asked for: its page is dropped. */
  #staleFetch = false;
  /**
   * The seqs known under the machine's epoch and the MsgIDs they name (seq-names.ts):
   * the highest one exactly, the {@link SEQ_NAMES} − 1 below it by a hash; delivered (as
   * a msg or a gap; a malformed entry's id is '', which no append has), or read as the
   * inbox's newest entry. An append or a page entry naming another message at one of
   * them proves the loss. Undefined: none known (nothing held for a user never sent
   * anything here).
   */
  #known: SeqNames | undefined;
  /**
   * The epoch the rotation in flight (or owed) asked to replace; after one `made`, kept
   * (until another is asked for): a page naming it again shows Redis went back past that
   * rotation, a second loss ({@link judge}). '' when none, or the last one was refused
   * or dropped. Only users whose epoch this node rotated hold one; the field is there
   * for every user anyway.
   */
  #asked = '';
  /** An epoch a resume claim's rotation was just refused for (cool-down): the next page judged does not ask again. */
  #kept: string | undefined;
  /** A sign of the node's own deliveries came while a rotation was in flight: asked for again if that one is refused. */
  #provenDuring = false;
  /** The cause the rotation in flight was asked for with. */
  #cause: RotationCause = 'delivered';
  /** A proven rotation of `#asked` failed: it is asked for again at the next heartbeat ({@link retry}). */
  #owed = false;

  /** True while a `rotate-epoch` is in flight, or owed after a proven one failed: the machine starts no fetch. */
  get rotating(): boolean {
    return this.#rotating || this.#owed;
  }

  /** `entry` was delivered (as a msg or a gap) under the machine's epoch; a malformed one's id is '', which no append has. */
  delivered(entry: PageEntry): void {
    if (this.#known === undefined) {
      if (entry.seq >= 1) this.#known = new SeqNames(entry.seq, entry.id);
    } else this.#known.record(entry.seq, entry.id);
  }

  /**
   * `page` was taken under the machine's epoch (after {@link judge}): its newest entry
   * names that MsgID at its seq. O(1): the read returned it beside the page.
   */
  read(page: InboxPage): void {
    if (page.newest !== undefined) this.delivered(page.newest);
  }

  /** The machine reads another epoch now: what was delivered under the old one no longer counts. */
  epochChanged(): void {
    this.#known = undefined;
  }

  /**
   * True when `entry`, appended (or read) under the machine's epoch, is at a seq known
   * ({@link delivered}, {@link read}) naming another message: the highest one, or one of
   * the {@link SEQ_NAMES} below it (by a hash of the MsgID: seq-names.ts). That seq was
   * lost and assigned again (under one epoch, without a loss, a seq only ever names one
   * message: append-13.lua never reuses one, and XADD takes no ID at or below the last).
   */
  reuses(entry: Pick<PageEntry, 'seq' | 'id'>): boolean {
    return this.#known?.namesOther(entry.seq, entry.id) === true;
  }

  /**
   * Judges a fetched `page` for resets, the machine's epoch being `epoch` (DESIGN.md
   * §11). Under another epoch, the inbox was recreated: each ready connection is
   * `reset`. Under the same one, each of these proves Redis lost writes and asks for a
   * new epoch (`delivered`), whose pull after `epochRotated` resets every connection
   * under it ({@link proves}): a latest seq below the highest seq known or below what a
   * ready connection was sent; a newest entry or any entry at a seq known naming
   * another message ({@link reuses}); an entry or the newest one at the seq of an append
   * offered while the fetch ran (`ended.offers`, when of the page's epoch) naming
   * another message. The machine's first page (`epoch` undefined: no epoch known yet)
   * is judged so too: it was read before a loss as much as any other. An epoch a
   * rotation made here replaced, read again (under whatever epoch the machine has
   * taken since), is a second loss that undid it: asked for again, not taken (the pull
   * after a rotation reads after it, and a fetch in flight when it was asked for is
   * dropped, so no page read before it is judged). With no inbox at all (epoch null: its
   * keys lost, no append since) there is nothing to rotate, and the connection is reset
   * (the append that recreates the inbox brings a new epoch). With no connection left
   * (the user's last one closed while the fetch ran: the hub keeps the session until
   * it is judged), the seqs known still prove it. A joining connection's claim of a
   * `last_seq` above the latest asks for one too (`resume`), unless it logged in while
   * the fetch ran (`late`: the page may predate what its device was sent elsewhere) or
   * a rotation for that claim was just refused in the cool-down (the machine then
   * resets the device alone, resume.ts `resetsOn`). After this page, a refused claim's
   * rotation may be asked for again (Redis decides).
   * @param ended the fetch it answers (fetch-cycle.ts `end`): who logged in while it ran
   *   (`late`), what was offered meanwhile (`offers`)
   * @returns true when the page is of another epoch than `epoch` (its ready connections
   *   were reset to it, and what was delivered under `epoch` no longer counts): the
   *   machine takes it even when a claim's rotation is asked for, so that one epoch
   *   change is one `reset` per connection
   * @param lineage `page`'s epoch's, when read: marks a reset's trimmed gap, and the
   *   messages sent again after it that the seqs known named (connection-state.ts `resetTo`)
   */
  judge(
    page: InboxPage, epoch: string | null | undefined, conns: Iterable<Conn>, ended: Pick<FetchEnd, 'late' | 'offers' | 'offersEpoch'>, effects: Effect[], lineage?: EpochLineage,
  ): boolean {
    const { late } = ended;
    // An epoch this node's rotation replaced, read again (the pull after it, or any later
    // page): Redis went back past that rotation. Not taken: asked for again instead.
    const undone = page.epoch !== null && page.epoch === this.#asked && !this.rotating;
    const epochChanged = typeof epoch === 'string' && page.epoch !== epoch && !undone;
    // What `epoch`'s seqs named, kept for the resets below (resent-marks.ts) as it is dropped.
    const names = this.#known;
    if (epochChanged) this.epochChanged();
    // The first page (no epoch known yet) is judged too: against the appends offered while it was read.
    else if (page.epoch !== null && (undone || ((page.epoch === epoch || epoch === undefined) && this.proves(page, ended.offersEpoch === page.epoch ? ended.offers : undefined)))) {
      this.rotate(page.epoch, false, effects, 'delivered');
    }
    for (const c of conns) {
      if (c.phase !== 'ready') {
        const claim = late?.has(c.id) !== true && resumesAboveLatest(c.resume, page);
        if (claim && page.epoch !== null && page.epoch !== this.#kept) this.rotate(page.epoch, false, effects, 'resume', page.latestSeq);
      } else if (epochChanged) {
        resetTo(c, page, effects, epoch, lineage, names);
      } else if (page.latestSeq < Math.max(c.sent, c.redeliverUpTo)) {
        // Against the highest seq ever written: a redelivery may have rewound `sent`.
        if (page.epoch === null) resetTo(c, page, effects);
        else this.rotate(page.epoch, false, effects, 'delivered');
      }
    }
    this.#kept = undefined;
    return epochChanged;
  }

  /**
   * Whether `page`, read under the machine's epoch, proves that Redis gave the inbox
   * back with less (DESIGN.md §11): its latest seq is below the highest seq known (the
   * latest never goes down under one epoch: append-13.lua takes the next seq above both
   * the counter and the stream's last entry; what the node knows was read or delivered
   * before this fetch started, or from pages read before it), its newest entry names
   * another message at that seq, an entry or its newest names another message at the
   * seq of an append offered while it ran (a page read before the loss, answered after
   * appends here took the lost seqs again). O(entries): each is looked up once.
   */
  proves(page: InboxPage, offers: FetchEnd['offers']): boolean {
    if (page.latestSeq < (this.#known?.top ?? 0)) return true;
    const newest = page.newest;
    if (newest !== undefined && this.reuses(newest)) return true;
    // A page entry naming another message at a seq known: a redelivery's, or a read after
    // a loss whose appends passed the highest seq known again.
    if (page.entries.some((e) => e.malformed !== true && this.reuses(e))) return true;
    if (offers === undefined) return false;
    const named = (e: PageEntry): boolean => e.malformed !== true && offers.namesOther(e.seq, e.id);
    return page.entries.some(named) || (newest !== undefined && named(newest));
  }

  /**
   * Asks for a new epoch in place of `epoch`, unless a rotation is in flight already.
   * @param fetchInFlight a fetch was started before: its page will be dropped ({@link fetchEnded})
   * @param cause what showed the inbox has less: `delivered` wins over a `resume` asked
   *   for earlier in the same `effects`, since it proves Redis's loss (never refused); one
   *   that comes while an earlier rotation is in flight is kept for its answer (`rotated`),
   *   one while a proven rotation is owed changes nothing (it is asked for again anyway)
   * @param readLatest for a `resume` one, the latest seq of the page that showed the claim
   *   (effects.ts `rotate-epoch`: the new epoch's lineage goes on from at most it)
   */
  rotate(epoch: string, fetchInFlight: boolean, effects: Effect[], cause: RotationCause, readLatest?: number): void {
    // Owed: the machine's epoch (`epoch`) is still the one asked to replace.
    if (this.#owed) return;
    if (this.#rotating) {
      if (cause === 'delivered') this.#provenDuring = true;
      const asked = effects.findIndex((e) => e.kind === 'rotate-epoch');
      const effect = effects[asked];
      if (cause === 'delivered' && effect?.kind === 'rotate-epoch' && effect.cause === 'resume') effects[asked] = { ...effect, cause };
      return;
    }
    this.#rotating = true;
    this.#asked = epoch;
    this.#cause = cause;
    // Or-ed: a fetch made stale by a proven rotation that failed may still be in flight.
    this.#staleFetch ||= fetchInFlight;
    effects.push(cause === 'resume' && readLatest !== undefined ? { kind: 'rotate-epoch', epoch, cause, readLatest } : { kind: 'rotate-epoch', epoch, cause });
  }

  /**
   * Asks again into `effects` for a proven rotation that failed (owed), as `delivered`.
   * The machine calls it on a heartbeat: the session's retry timer after a failure, with
   * the back-off of a failed fetch (retry-backoff.ts), never in a loop.
   * @param fetchInFlight a fetch was started before: its page will be dropped
   * @returns true when it asked (the machine then starts no fetch)
   */
  retry(fetchInFlight: boolean, effects: Effect[]): boolean {
    if (!this.#owed) return false;
    this.#owed = false;
    this.rotate(this.#asked, fetchInFlight, effects, 'delivered');
    return true;
  }

  /**
   * The rotation asked for was tried, with `outcome`. When Redis refused it (`kept`: a
   * resume claim's, in the cool-down) but a sign of the node's own deliveries came while
   * it was in flight, the loss is proven: a rotation is asked for again into `effects`,
   * as `delivered`, which is never refused (else a device would skip the seqs assigned
   * again, with no `reset`: DESIGN.md §11). When the call `failed` and the loss was
   * proven (its cause, or a sign while in flight), the rotation is owed until one is
   * made: {@link retry} asks for it again. A failed `resume` one with no such sign is
   * dropped: the pull that follows reads again, and a claiming device still joining
   * shows it again (as does any later resume of one).
   */
  rotated(outcome: RotationOutcome, effects: Effect[]): void {
    this.#rotating = false;
    const proven = this.#provenDuring || this.#cause === 'delivered';
    this.#provenDuring = false;
    if (outcome === 'failed') this.#owed = proven;
    else if (outcome === 'kept' && proven) this.rotate(this.#asked, false, effects, 'delivered');
    else if (outcome === 'kept') this.#kept = this.#asked;
    // Made: `#asked` marks the pages judged after it (a second loss may undo it). Else nothing is asked.
    if (outcome !== 'made' && !this.rotating) this.#asked = '';
  }

  /** The fetch in flight ended (answered or failed). @returns true when its page is to be dropped */
  fetchEnded(): boolean {
    const stale = this.#staleFetch;
    this.#staleFetch = false;
    return stale;
  }
}
