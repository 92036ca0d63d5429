/**
 * One user's inbox in memory (the delivery machine's tests' model of Redis): it answers
 * a read with the page and records Redis would give (a double of data, not of the
 * network), and it is the oracle of what may rightly be reported missing, and why, when
 * the driver checks a `gap` (machine-checks.ts, strict mode). Trims, hand deletions,
 * expiries, unreadable records, recreation, restores and epoch rotations change it as
 * the store's scripts would.
 */
import type { GapReason } from '../../src/delivery/message-view.js';
import type { InboxEntry, InboxPage } from '../../src/inbox/inbox.js';
import type { EpochLineage } from '../../src/inbox/lineage.js';
import { isUnreadable, unreadableRecord, type ReadRecord } from '../../src/store/unreadable.js';
import { MsgKind } from '../../src/ids/msg-id.js';

/** One user's inbox in memory, with the semantics of `Inbox.range` (InboxPage's doc). */
export class FakeInbox {
  epoch: string | null = 'ep1';
  latest = 0;
  /** Oldest retained seq; `latest + 1` when nothing is retained. */
  first = 1;
  readonly #content = new Map<number, ReadRecord | null>();
  /** Bumped when the inbox is recreated or restored: a seq reused then names another message. */
  #generation = 0;
  /** The meta's `lineage` (src/inbox/lineage.ts): set by a rotation, kept by a recreation (it then names another epoch). */
  lineage: EpochLineage | undefined;

  /** The MsgID at `seq` in this generation of the inbox. */
  idOf(seq: number): string {
    return (this.#generation * 2 ** 40 + seq).toString(16).padStart(16, '0');
  }

  /** Appends `n` messages; returns the last seq. An inbox that does not exist (epoch null) is created by the first, in a new epoch, as the append script does. */
  append(n = 1): number {
    if (this.epoch === null) this.epoch = `ep-created-${this.#generation}`;
    for (let i = 0; i < n; i++) {
      this.latest += 1;
      const seq = this.latest;
      this.#content.set(seq, { id: this.idOf(seq), kind: MsgKind.user, type: 'chat', data: { n: seq }, ts: 1_000 + seq, expiresAt: 9e15 });
    }
    return this.latest;
  }

  /** Seqs whose content expired (one-way, like trims: a fetch that read one so may be answered after a trim). */
  readonly #expired = new Set<number>();

  /** The content of these seqs expired in the store (the inbox entries stay). */
  expire(...seqs: number[]): void {
    for (const s of seqs) {
      this.#content.set(s, null);
      this.#expired.add(s);
    }
  }

  /** The time the machine judges expiry by (its config's `now`, when a test gives it this clock), ms. */
  nowMs = 0;

  /** The content of `seq` expires at `ms` (read until then; sent after it only as an `expired` gap). */
  expiresAt(seq: number, ms: number): void {
    const record = this.#content.get(seq);
    if (record && !isUnreadable(record)) this.#content.set(seq, { ...record, expiresAt: ms });
  }

  /** Seqs whose stored record cannot be decoded (src/store/unreadable.ts). */
  readonly #unreadable = new Set<number>();

  /** The stored records of these seqs cannot be decoded: the store answers the unreadable mark. */
  breakRecords(...seqs: number[]): void {
    for (const s of seqs) {
      this.#content.set(s, unreadableRecord(this.idOf(s)));
      this.#unreadable.add(s);
    }
  }

  /** Entries deleted by hand (XDEL): holes in the stream. */
  readonly holes = new Set<number>();

  /**
   * True when `seq` can rightly be reported as a gap: trimmed, deleted by hand, or its
   * content expired. (Not meaningful across `recreate` or `restoreTo`.)
   */
  isMissing(seq: number): boolean {
    return seq < this.first || this.holes.has(seq) || (seq <= this.latest && (this.#content.get(seq) === null || this.#unreadable.has(seq)));
  }

  /**
   * True when `seq` can rightly be reported as a gap for `reason`: `trimmed` when it is
   * not in the stream (below the first retained, or deleted by hand), `expired` when its
   * content expired (it may have been trimmed since: both are one-way), `undeliverable`
   * when its record cannot be decoded (the machine's only undeliverable gaps: the
   * session makes those of msgs it cannot serialise). (Not meaningful across `recreate`
   * or `restoreTo`.)
   */
  missingFor(seq: number, reason: GapReason): boolean {
    if (reason === 'trimmed') return seq < this.first || this.holes.has(seq);
    if (reason === 'undeliverable') return this.#unreadable.has(seq);
    const record = this.#content.get(seq);
    return reason === 'expired' && (this.#expired.has(seq) || (record != null && !isUnreadable(record) && record.expiresAt <= this.nowMs));
  }

  /** Trimmed by the cap: entries below `first` are gone. */
  trimTo(first: number): void {
    for (let s = this.first; s < first; s++) this.#content.delete(s);
    this.first = first;
  }

  /** A new inbox (FLUSHALL, then an append): new epoch, seqs restart. */
  recreate(epoch: string | null): void {
    this.#content.clear();
    this.#expired.clear();
    this.#generation += 1;
    this.epoch = epoch;
    this.latest = 0;
    this.first = 1;
  }

  /** Redis restored from an older snapshot: the same epoch with less in it. */
  restoreTo(latest: number): void {
    for (let s = latest + 1; s <= this.latest; s++) this.#content.delete(s);
    this.#generation += 1;
    this.latest = latest;
    this.first = Math.min(this.first, latest + 1);
  }

  /**
   * While true, a rotation asked for by a resume claim is refused, as rotate-7.lua does
   * within the cool-down of the last one (epoch-guard.ts RESUME_ROTATION_COOLDOWN_MS).
   */
  coolingDown = false;

  /**
   * `Inbox.rotateEpoch`: a new epoch when it is still `expected` (rotate-7.lua), unless
   * `cause` is `resume` while {@link coolingDown}; the seqs stay. Its lineage goes on
   * from the latest seq, except after a loss the node proved (`delivered`: through 0,
   * as rotate-7.lua); `generation` stands for a rotation made elsewhere that keeps the
   * numbering (append-13.lua's after a raise, `pixiu redis lost-writes`).
   * @param readLatest a `resume` one's: the latest seq the read that showed the claim
   *   found, below which the lineage stays (rotate-7.lua ARGV[5])
   * @returns true when it was refused so (the epoch kept)
   */
  rotateEpoch(expected: string, cause = 'delivered', readLatest?: number): boolean {
    if (this.epoch !== expected) return false;
    if (cause === 'resume' && this.coolingDown) return true;
    // Epochs are never made twice: `expected` rotated again (after Redis lost the first
    // rotation) gets another name.
    const made = `${expected}-rotated`;
    this.epoch = this.#made.has(made) ? `${made}-again` : made;
    this.#made.add(this.epoch);
    // As rotate-7.lua: a proven loss vouches for no seq of the old epoch.
    this.lineage = { epoch: this.epoch, replaced: expected, through: cause === 'delivered' ? 0 : Math.min(this.latest, readLatest ?? this.latest) };
    return false;
  }

  /** The epochs {@link rotateEpoch} made. */
  readonly #made = new Set<string>();

  /** What `Inbox.range` + `MessageStore.getMany` answer, as one snapshot (with the newest entry, `InboxPage.newest`). */
  read(afterSeq: number, limit: number): { page: InboxPage; records: (ReadRecord | null)[] } {
    const entries: InboxEntry[] = [];
    const records: (ReadRecord | null)[] = [];
    for (let s = Math.max(afterSeq + 1, this.first); s <= this.latest && entries.length < limit; s++) {
      if (this.holes.has(s)) continue;
      entries.push({ seq: s, id: this.idOf(s), kind: MsgKind.user });
      records.push(this.#content.get(s) ?? null);
    }
    const first = this.latest >= this.first ? this.first : this.latest + 1;
    // The stream's newest entry, as range-3.lua returns it beside the page.
    let top = this.latest;
    while (top >= this.first && this.holes.has(top)) top--;
    const page: InboxPage = { epoch: this.epoch, firstSeq: first, latestSeq: this.latest, entries };
    return { page: top >= this.first ? { ...page, newest: { seq: top, id: this.idOf(top), kind: MsgKind.user } } : page, records };
  }
}
