/**
 * Which message each of the last {@link SEQ_NAMES} seqs known under one inbox epoch
 * names, as a 32-bit hash of its MsgID (epoch-guard.ts). Under one epoch, without a
 * loss, a seq only ever names one message (append-13.lua never reuses one, and XADD
 * takes no ID at or below the last), so an append or a page entry naming another one
 * at a known seq proves that Redis gave the inbox back with less (DESIGN.md §11;
 * docs/decisions.md "Redis with less than it had").
 *
 * Why more than the highest seq known: after a loss, appends made here land on seqs
 * below it too, and their offers, or a redelivery's page, can come after a read has
 * moved the highest seq up again (a model review's findings: a stale page's seqs
 * taken again under it, a redelivery reading the new message at a seq delivered as
 * another one). Why a hash: 64 slots of 4 bytes in one typed array (~0.45 KiB per
 * user with messages here, measured: 256 bytes of slots and the array's objects)
 * instead of 64 strings of 16 characters; a collision (2^-32 per comparison) only
 * misses a sign, it never makes a false one (one MsgID always hashes alike).
 *
 * The guard makes one with the first seq it knows and drops it with the epoch: a user
 * whose connections here were never sent anything holds none (bench/e2e.ts case (c),
 * memory per idle connection).
 */

/** Seqs whose MsgID is remembered below (and at) the highest one recorded. */
export const SEQ_NAMES = 64;

/** FNV-1a of `id`'s UTF-16 code units, never 0 (0 marks an empty slot). */
export function nameHash(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) {
    h ^= id.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0 || 1;
}

/**
 * The highest seq known under one epoch with its MsgID (exact), and the names of the
 * {@link SEQ_NAMES} − 1 seqs below it that are known (hashed). See the module comment.
 */
export class SeqNames {
  /** The highest seq recorded (≥ 1). */
  #top: number;
  /** Its MsgID as recorded ('' for a malformed entry's, which no append has). */
  #topId: string;
  /** Slot `seq % SEQ_NAMES`: {@link nameHash} of the MsgID at seq, for seqs in (top − SEQ_NAMES, top]; 0 when not known. */
  readonly #hashes = new Uint32Array(SEQ_NAMES);

  /** Made with the first seq known. */
  constructor(seq: number, id: string) {
    this.#top = seq;
    this.#topId = id;
    this.#hashes[seq % SEQ_NAMES] = nameHash(id);
  }

  /** The highest seq recorded. */
  get top(): number {
    return this.#top;
  }

  /** `seq` names MsgID `id` (delivered, or read as the inbox's newest entry). A seq at or below top − SEQ_NAMES is not kept. */
  record(seq: number, id: string): void {
    if (seq <= this.#top - SEQ_NAMES || seq < 1) return;
    const hashes = this.#hashes;
    if (seq > this.#top) {
      // The slots of the seqs skipped over (and of those that fall out) are no longer known.
      if (seq - this.#top >= SEQ_NAMES) hashes.fill(0);
      else for (let s = this.#top + 1; s < seq; s++) hashes[s % SEQ_NAMES] = 0;
      this.#top = seq;
      this.#topId = id;
    }
    hashes[seq % SEQ_NAMES] = nameHash(id);
  }

  /**
   * True when `seq` is known to name another message than `id`: the highest seq by its
   * MsgID, the ones below by its hash. O(1).
   */
  namesOther(seq: number, id: string): boolean {
    if (seq === this.#top) return id !== this.#topId;
    const known = this.#hashAt(seq);
    return known !== 0 && known !== nameHash(id);
  }

  /**
   * True when `seq` is known to name MsgID `id`: the highest seq by its MsgID, the ones
   * below by its hash (a collision, 2^-32 per comparison, answers true for another
   * message). False when `seq` is not known. O(1).
   */
  names(seq: number, id: string): boolean {
    if (seq === this.#top) return id === this.#topId;
    const known = this.#hashAt(seq);
    return known !== 0 && known === nameHash(id);
  }

  /** The hash kept for `seq` below the highest one: 0 when not known (above top, at or below top − SEQ_NAMES, or never recorded). */
  #hashAt(seq: number): number {
    if (seq > this.#top || seq <= this.#top - SEQ_NAMES || seq < 1) return 0;
    return this.#hashes[seq % SEQ_NAMES] ?? 0;
  }
}
