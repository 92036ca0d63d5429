/**
 * What the per-user machine sends from what it read (machine.ts, DESIGN.md §5): on a
 * fetched page, joining connections join (their `welcome`), ready ones are sent what it
 * holds after their cursor within their window, and what it held beyond a window is
 * kept (read-ahead.ts) and served from as windows free up, until every connection was
 * sent it. The reads themselves: fetch-cycle.ts. No I/O: frames go out as effects.
 */
import type { InboxPage } from '../inbox/inbox.js';
import type { EpochLineage } from '../inbox/lineage.js';
import type { ReadRecord } from '../store/message-store.js';
import { deliverPage, joinAt, type Conn } from './connection-state.js';
import { anyReadyBefore } from './conn-queries.js';
import type { Effect, MachineConfig } from './effects.js';
import type { EpochGuard } from './epoch-guard.js';
import type { FetchEnd } from './fetch-cycle.js';
import { ReadAhead } from './read-ahead.js';
import { resetsOn } from './resume.js';

/** One user's deliveries from pages; owned by its machine. See the module comment. */
export class PageDelivery {
  readonly #user: string;
  readonly #config: MachineConfig;
  /** Told each entry a delivery moved a connection onto or past (epoch-guard.ts `delivered`). */
  readonly #guard: Pick<EpochGuard, 'delivered'>;
  /** Most entries read ahead: two fetches' worth. */
  readonly #aheadMax: number;
  /** Entries read but not yet sent to every connection (read-ahead.ts); made on the first page with entries. */
  #ahead: ReadAhead | undefined;

  /** @param fetchLimit entries per fetch (fetch-cycle.ts `fetchLimit`) */
  constructor(user: string, config: MachineConfig, fetchLimit: number, guard: Pick<EpochGuard, 'delivered'>) {
    this.#user = user;
    this.#config = config;
    this.#aheadMax = 2 * fetchLimit;
    this.#guard = guard;
  }

  /** Forgets what was read ahead: it is read again (content may have expired since, or the inbox changed under it). */
  dropAhead(): void {
    this.#ahead?.clear();
  }

  /**
   * Delivers a fetched `page` into `effects`: joining connections join on it, but for
   * one that logged in while the fetch ran (`ended.late`) when the fetch was an offer's
   * or the page resets it (resume.ts `resetsOn`); then each ready connection not paused
   * at or past the fetch's start is sent what the page holds, which is kept for them.
   * @param records the content of `page.entries[i]` (null: expired, missing; the
   *   unreadable mark: it cannot be decoded)
   * @param ended the fetch it answers (fetch-cycle.ts `end`)
   * @param lineage `page`'s epoch's, when read (a joining connection's `reset`: connection-state.ts `joinAt`)
   */
  page(conns: Iterable<Conn>, page: InboxPage, records: readonly (ReadRecord | null)[], ended: FetchEnd, effects: Effect[], lineage?: EpochLineage): void {
    const { after, late, offered } = ended;
    for (const c of conns) {
      // One that logged in while an offer's delivery waited asked for a fetch of its own (login).
      if (c.phase !== 'joining' || (late?.has(c.id) === true && (offered || resetsOn(c.resume, page)))) continue;
      joinAt(c, page, this.#user, this.#config.heartbeatMs, effects, lineage);
    }
    // Fewer entries than asked: none is missing from the page but those deleted by hand.
    const complete = page.entries.length < ended.limit;
    for (const c of conns) if (!c.paused && c.sent >= after) this.#deliver(c, page, records, effects, complete);
    // Kept only while a connection has not been sent all of it.
    const last = page.entries[page.entries.length - 1];
    if (last !== undefined && anyReadyBefore(conns, last.seq)) {
      (this.#ahead ??= new ReadAhead(this.#aheadMax)).absorb(after, page, records);
      this.serveAhead(conns, effects);
    } else {
      this.#ahead?.clear();
    }
  }

  /** Sends each ready connection inside the read-ahead what its window takes; drops what all were sent. */
  serveAhead(conns: Iterable<Conn>, effects: Effect[]): void {
    const ahead = this.#ahead;
    const view = ahead?.view();
    if (ahead === undefined || view === undefined) return;
    let minSent = Number.POSITIVE_INFINITY;
    for (const c of conns) {
      if (c.phase !== 'ready') continue;
      if (!c.paused && c.inflight.length < this.#config.window && ahead.covers(c.sent)) {
        this.#deliver(c, view.page, view.records, effects);
      }
      minSent = Math.min(minSent, c.sent);
    }
    if (minSent === Number.POSITIVE_INFINITY) ahead.clear();
    else ahead.dropThrough(minSent);
  }

  /**
   * Sends a ready connection what the page holds after its cursor (deliverPage), noting
   * each entry it delivered (as a msg or a gap), not only the last: the guard checks
   * every seq it knows against later appends, notifies and pages (seq-names.ts), and a
   * page of several entries delivered at once is how a connection that joins or falls
   * behind is sent them. O(entries). Its byte allowance is read here, once per page
   * (effects.ts `ByteRoom`), and given to deliverPage as data (its bytes, and whether
   * they are the budget's floor, which the page's `hold` carries).
   */
  #deliver(c: Conn, page: InboxPage, records: readonly (ReadRecord | null)[], effects: Effect[], complete = false): void {
    const from = c.sent;
    const last = deliverPage(c, page, records, this.#config, effects, complete, (this.#config.now ?? Date.now)(), c.room?.byteAllowance());
    if (last === undefined) return;
    for (const entry of page.entries) if (entry.seq > from && entry.seq <= last.seq) this.#guard.delivered(entry);
  }
}
