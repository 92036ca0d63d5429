/**
 * The entries of an inbox page as Redis gave them (`range-3.lua`), read for
 * `Inbox.range` (codec.ts `toEntry`), and the warning about an entry that is not what
 * the append script writes, logged once per entry however often it is read (every
 * fetch of every device and every history page holding it): docs/decisions.md
 * "Malformed inbox entries".
 */
import type { Logger } from '../logger.js';
import { SeenKeys } from '../seen-keys.js';
import { toEntry, type InboxEntry, type PageEntry } from './codec.js';
import type { RawStreamEntry } from './scripts.js';

/** How many malformed entries (user and stream ID) are remembered as logged; one forgotten is logged again when read. */
export const MALFORMED_LOGGED_MAX = 1024;

/** Reads pages' entries; one per Inbox (a node's), so that each entry is logged once on a node. */
export class PageEntries {
  readonly #logger: Logger | undefined;
  readonly #logged = new SeenKeys(MALFORMED_LOGGED_MAX);

  /** @param logger where the warnings go; none: not logged */
  constructor(logger: Logger | undefined) {
    this.#logger = logger;
  }

  /**
   * The entries of user `uid`'s page, in stream order: a {@link PageEntry} for each raw
   * entry, a malformed one included (its seq is a gap, reason `undeliverable`), except
   * one whose seq cannot be read (above 2^53 − 1), which is left out. Either is
   * logged at warn, the first time it is read, with the user and the stream ID.
   */
  read(uid: string, raw: readonly RawStreamEntry[]): PageEntry[] {
    const entries: PageEntry[] = [];
    for (const item of raw) {
      const entry = toEntry(item);
      if (entry === undefined || entry.malformed === true) this.#warn(uid, item[0], entry !== undefined);
      if (entry !== undefined) entries.push(entry);
    }
    return entries;
  }

  /**
   * The stream's newest entry as `range-3.lua` returns it beside a page (`InboxPage.newest`):
   * a seq and the MsgID it names under the page's epoch, learnt by the delivery's epoch
   * guard (an append that later lands on that seq as another message proves Redis lost
   * writes: DESIGN.md §11, src/delivery/epoch-guard.ts). Undefined when the stream is
   * empty (`last` null) or the entry is not what the append script writes: a malformed
   * one names no message (it is logged when a page holding it is read, not here).
   */
  static newest(last: RawStreamEntry | null): InboxEntry | undefined {
    const entry = last === null ? undefined : toEntry(last);
    return entry?.malformed === true ? undefined : entry;
  }

  #warn(uid: string, entryId: string, kept: boolean): void {
    // A newline cannot be in a stream ID: the key names one entry of one user.
    if (this.#logger === undefined || !this.#logged.add(`${uid}\n${entryId}`)) return;
    if (kept) {
      this.#logger.warn({ user: uid, entryId },
        'inbox entry is not one the append script writes (its id, kind or stream ID): its seq is delivered as a gap (reason undeliverable)');
    } else {
      this.#logger.warn({ user: uid, entryId },
        'inbox entry has a stream ID above any seq (2^53 - 1): skipped (the inbox\'s latest seq is beyond what the server handles too)');
    }
  }
}
