/**
 * Reading one user's inbox with content (DESIGN.md §7 `GET /v1/users/{uid}/messages`,
 * and `/v1/me/messages`): one inbox page, its contents fetched from the store in
 * chunks ({@link nextChunk}), and what cannot be delivered reported as gaps, never
 * skipped silently (DESIGN.md §11).
 *
 * A page also ends once its messages' data comes to {@link MAX_PAGE_DATA_CHARS}: 1,000
 * messages of 64 KiB were one 65 MB answer, held in memory and serialised at once, and
 * a user's token could ask for dozens of them in parallel (a fresh tester took a node
 * to 8 GB of memory and 28 s without answering `/healthz`). `next_after_seq` tells the
 * reader where to go on, as at the end of any page.
 */
import type { Inbox } from '../inbox/inbox.js';
import { readEntryRecords } from '../delivery/entry-records.js';
import type { RecordReader } from '../store/record-reader.js';
import { isUnreadable } from '../store/unreadable.js';
import { addGap, messageView, type MessageView, type SeqGap } from '../delivery/message-view.js';
import { MAX_READABLE_DEPTH, nestsDeeperThan } from '../store/data-depth.js';
import type { HistoryBudget } from './history-budget.js';

/**
 * Most JSON text of `data` in one page, characters (1 MiB): a page stops before the
 * message that would take it past this, but always holds one message when there is one
 * (however large `PIXIU_MAX_MESSAGE_BYTES` lets one be; 64 KiB by default, DESIGN.md
 * §7). Small messages never meet it: 1,000 of 1 KiB fill a page by count.
 */
export const MAX_PAGE_DATA_CHARS = 1024 * 1024;

/** Records of a page's first read from the store: 16 of the largest default messages fill it. */
const FIRST_READ = 16;
/** Most records of one later read: bounds what one read holds however small the earlier messages were. */
const MAX_READ = 256;

/**
 * How many records the next read asks for: as many as the data budget left would hold
 * at the size of the messages read so far, and one more (to find the one that ends the
 * page). Small messages are read in two round trips however many; large ones are
 * not read much past the cut, where the next page reads them again.
 * @param read messages read so far, `chars` their data's JSON length
 */
function nextChunk(read: number, chars: number): number {
  if (read === 0) return FIRST_READ;
  const left = Math.max(0, MAX_PAGE_DATA_CHARS - chars);
  return Math.min(MAX_READ, Math.ceil(left / Math.max(1, chars / read)) + 1);
}

/** One page of history. */
export interface HistoryPage {
  user: string;
  /** The inbox epoch; null when the user has no inbox yet. */
  epoch: string | null;
  first_seq: number;
  latest_seq: number;
  /** Messages with seq > after_seq, oldest first. */
  messages: MessageView[];
  /**
   * Seqs after `after_seq` that cannot be read, in runs of one reason, in seq order:
   * `trimmed` by the inbox cap (below `first_seq`) or deleted from the stream by hand
   * (XDEL); `expired`, their content gone from the store; `undeliverable`, content that
   * is there but cannot be read: its stored bytes cannot be decoded, or it nests deeper
   * than `MAX_READABLE_DEPTH`; or an inbox entry that names no message (inbox.ts
   * MalformedEntry).
   */
  gaps: SeqGap[];
  /** Pass as `after_seq` to read the next page; equals `latest_seq` at the end, or `after_seq` when that is above `latest_seq`. */
  next_after_seq: number;
}

/** What one message or gap of a page costs besides its data, bytes (its other fields, as held and as sent). */
const ENTRY_BYTES = 200;

/**
 * The most bytes a page of `limit` messages holds while it is built and sent (its data's
 * JSON text twice, as a string and as the bytes written, and its other fields): what a
 * request holds of the {@link HistoryBudget} until its page is read. Its data is at most
 * {@link MAX_PAGE_DATA_CHARS}, and at most `limit` messages of `maxMessageBytes` each
 * (a message's data is part of its encoded size): a page of one small message held a
 * full page's 2 MiB, and 31 such requests at once filled the 64 MiB budget (a fresh
 * tester's finding).
 * @param maxMessageBytes the largest encoded message (`PIXIU_MAX_MESSAGE_BYTES`)
 */
export function pageHoldBytes(limit: number, maxMessageBytes: number): number {
  return 2 * Math.min(MAX_PAGE_DATA_CHARS, limit * maxMessageBytes) + ENTRY_BYTES * limit;
}

/**
 * Reads up to `limit` messages after `afterSeq`, fewer when their data would come to
 * more than {@link MAX_PAGE_DATA_CHARS}.
 * @param sized told the page's bytes as {@link pageHoldBytes} counts them, once it is read
 * @throws PixiuError UNAVAILABLE when Redis or the store fails, or a record's owning
 *   node cannot be read now (never a gap for it: HTTP 503 with Retry-After) — unless its
 *   inbox entry says the message expired (its `exp`: src/delivery/entry-records.ts), which
 *   is a gap without a read
 */
export async function readHistory(
  inbox: Inbox, store: RecordReader, user: string, afterSeq: number, limit: number, sized?: (bytes: number) => void,
): Promise<HistoryPage> {
  const page = await inbox.range(user, afterSeq, limit);
  const gaps: SeqGap[] = [];
  const messages: MessageView[] = [];
  // The last entry this page answers for (a message or a gap); the next page starts after it.
  let lastSeq: number | undefined;
  // The next seq the page owes an answer for: one with no entry (trimmed by the cap, below
  // first_seq, or deleted by hand, XDEL, anywhere in the stream) is a gap, as delivery
  // reports it (connection-state.ts), never skipped silently.
  let expected = afterSeq + 1;
  let cut = false;
  let chars = 0;
  let read = 0;
  read: for (let from = 0, size = FIRST_READ; from < page.entries.length; from += size, size = nextChunk(read, chars)) {
    const entries = page.entries.slice(from, from + size);
    // Entries whose own expiry passed are not read (entry-records.ts): a gap, owner down or not.
    const records = await readEntryRecords(store, entries, Date.now());
    read += records.filter((r) => r !== null).length;
    for (const [i, entry] of entries.entries()) {
      // Below a seq answered already: a malformed entry at seq 0, or at the seq of the
      // entry before it (`<seq>-<n>` after `<seq>-0`: inbox.ts MalformedEntry).
      if (entry.seq < expected) continue;
      if (entry.seq > expected) {
        addGap(gaps, expected, entry.seq - 1, 'trimmed');
        lastSeq = entry.seq - 1;
      }
      expected = entry.seq + 1;
      const record = records[i];
      // Content gone from the store is an `expired` gap; content whose stored bytes
      // cannot be decoded (src/store/unreadable.ts), or too deep to serialise (stored
      // before ingest limited depth), and an entry that names no message (not what the
      // append script writes: inbox.ts MalformedEntry), an `undeliverable` one, never a
      // failed page: as delivery reports them (connection-state.ts, session.ts).
      if (entry.malformed === true || isUnreadable(record)) {
        addGap(gaps, entry.seq, entry.seq, 'undeliverable');
      } else if (!record) {
        addGap(gaps, entry.seq, entry.seq, 'expired');
      } else if (nestsDeeperThan(record.data, MAX_READABLE_DEPTH)) {
        addGap(gaps, entry.seq, entry.seq, 'undeliverable');
      } else {
        chars += JSON.stringify(record.data)?.length ?? 0;
        if (chars > MAX_PAGE_DATA_CHARS && messages.length > 0) {
          cut = true;
          break read;
        }
        messages.push(messageView(entry, record));
      }
      lastSeq = entry.seq;
    }
  }
  // Fewer entries than asked: the stream ended, and the seqs after its last entry up to
  // the latest are gone (all trimmed, or deleted by hand).
  if (!cut && page.entries.length < limit && expected <= page.latestSeq) {
    addGap(gaps, expected, page.latestSeq, 'trimmed');
    lastSeq = page.latestSeq;
  }
  // Nothing answered for: `after_seq` is at or past the latest.
  const next = lastSeq ?? afterSeq;
  sized?.(2 * Math.min(chars, MAX_PAGE_DATA_CHARS) + ENTRY_BYTES * (messages.length + gaps.length));
  return {
    user,
    epoch: page.epoch,
    first_seq: page.firstSeq,
    latest_seq: page.latestSeq,
    messages,
    gaps,
    next_after_seq: next,
  };
}
