/**
 * A user's read-ahead (DESIGN.md §5, "one fetch in flight per user"): the entries of
 * the last fetched pages, with their records, that some connection of the user has
 * not been sent yet.
 *
 * A fetch reads a page of up to `pageMax` entries, but a connection can take only as
 * many as its window has room for; a client acking as it reads frees a few slots at a
 * time. Without this, each of those few slots cost a new fetch of a whole page (one
 * inbox read and one store read of up to `pageMax` records), and a catch-up read most
 * of its backlog many times over. The machine (machine.ts; page-delivery.ts) serves a
 * connection whose cursor lies inside the read-ahead from it, and fetches only past
 * its end.
 *
 * What it holds is the inbox as of the reads that filled it, so it is dropped whenever
 * that may no longer be true enough:
 * - a page of another epoch, or one whose latest seq is below the read-ahead's end
 *   (the inbox was recreated or restored with less, DESIGN.md §11), replaces it;
 * - the machine clears it on a heartbeat (what changed in the inbox since, read again)
 *   and on a notify of a seq that is not new (a sign of a recreated or restored inbox);
 *   content held past its `expiresAt` goes out as an `expired` gap whenever it is sent
 *   (connection-state.ts `deliverPage`), never as a message;
 * - entries every connection has been sent are dropped; when none is left, all of it.
 * It never holds more than `maxEntries` entries.
 */
import type { InboxPage, PageEntry } from '../inbox/inbox.js';
import type { ReadRecord } from '../store/unreadable.js';

/** A page and its records, as the machine delivers from. */
export interface PageView {
  readonly page: InboxPage;
  /** `records[i]`: the content of `page.entries[i]`, null when expired or missing, the unreadable mark when it cannot be decoded. */
  readonly records: readonly (ReadRecord | null)[];
}

/** See the module comment. */
export class ReadAhead {
  readonly #maxEntries: number;
  /** Bounds and entries; `entries` covers every seq in (`#after`, {@link end}]. */
  #page: { epoch: string | null; firstSeq: number; latestSeq: number; entries: PageEntry[] } | undefined;
  #records: (ReadRecord | null)[] = [];
  /** The seq the held entries start after. */
  #after = 0;

  /** @param maxEntries most entries held (a couple of pages) */
  constructor(maxEntries: number) {
    this.#maxEntries = maxEntries;
  }

  /** Entries held (for tests and metrics). */
  get size(): number {
    return this.#page?.entries.length ?? 0;
  }

  /** The last seq held; meaningless when {@link size} is 0. */
  get end(): number {
    const entries = this.#page?.entries;
    return entries === undefined || entries.length === 0 ? this.#after : (entries[entries.length - 1] as PageEntry).seq;
  }

  /** True when the next seq after `sent` is held: a connection there is served from here. */
  covers(sent: number): boolean {
    return this.size > 0 && sent >= this.#after && sent < this.end;
  }

  /** What is held, as a page to deliver from; undefined when empty. */
  view(): PageView | undefined {
    return this.#page === undefined ? undefined : { page: this.#page, records: this.#records };
  }

  /**
   * Takes in a fetched page: the entries after `after`. A page that continues what is
   * held (same epoch, starting at its end) is appended while the total stays within
   * `maxEntries`; a page of another epoch, or one that says the inbox ends below what
   * is held, replaces it; an empty page otherwise changes nothing; any other page
   * replaces it.
   */
  absorb(after: number, page: InboxPage, records: readonly (ReadRecord | null)[]): void {
    const held = this.#page;
    const stale = held !== undefined && (held.epoch !== page.epoch || page.latestSeq < this.end);
    if (stale) this.clear();
    if (page.entries.length === 0) return;
    if (this.#page !== undefined && after === this.end && this.size + page.entries.length <= this.#maxEntries) {
      const p = this.#page;
      for (let i = 0; i < page.entries.length; i++) {
        p.entries.push(page.entries[i] as PageEntry);
        this.#records.push(records[i] ?? null);
      }
      p.latestSeq = Math.max(p.latestSeq, page.latestSeq);
      return;
    }
    const keep = Math.min(page.entries.length, this.#maxEntries);
    this.#page = { epoch: page.epoch, firstSeq: page.firstSeq, latestSeq: page.latestSeq, entries: page.entries.slice(0, keep) };
    this.#records = records.slice(0, keep);
    this.#after = after;
  }

  /** Drops the entries at or below `sent` (every connection has been sent them). */
  dropThrough(sent: number): void {
    const p = this.#page;
    if (p === undefined || sent < this.#after) return;
    let drop = 0;
    while (drop < p.entries.length && (p.entries[drop] as PageEntry).seq <= sent) drop++;
    if (drop === p.entries.length) {
      this.clear();
      return;
    }
    p.entries.splice(0, drop);
    this.#records.splice(0, drop);
    this.#after = sent;
  }

  /** Forgets everything held. */
  clear(): void {
    this.#page = undefined;
    this.#records = [];
    this.#after = 0;
  }
}
