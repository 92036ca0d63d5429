/**
 * Reading one user's inbox with content (DESIGN.md §7 `GET /v1/users/{uid}/messages`,
 * and `/v1/me/messages`): one inbox page, its contents fetched from the store in one
 * `getMany`, and what cannot be delivered reported as gaps, never skipped silently
 * (DESIGN.md §11).
 */
import type { Inbox } from '../inbox/inbox.js';
import type { RecordReader } from '../store/record-reader.js';
import { addGap, messageView, type MessageView, type SeqGap } from '../delivery/message-view.js';
import { MAX_READABLE_DEPTH, nestsDeeperThan } from '../store/data-depth.js';

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
   * Seqs after `after_seq` that cannot be read: trimmed by the inbox cap (below
   * `first_seq`), or whose content expired or nests deeper than `MAX_READABLE_DEPTH`.
   */
  gaps: SeqGap[];
  /** Pass as `after_seq` to read the next page; equals `latest_seq` at the end. */
  next_after_seq: number;
}

/**
 * Reads up to `limit` messages after `afterSeq`.
 * @throws PixiuError UNAVAILABLE when Redis or the store fails, or a record's owning
 *   node cannot be read now (never a gap for it: HTTP 503 with Retry-After)
 */
export async function readHistory(
  inbox: Inbox, store: RecordReader, user: string, afterSeq: number, limit: number,
): Promise<HistoryPage> {
  const page = await inbox.range(user, afterSeq, limit);
  const gaps: SeqGap[] = [];
  if (afterSeq + 1 < page.firstSeq && page.latestSeq > 0) {
    addGap(gaps, afterSeq + 1, Math.min(page.firstSeq - 1, page.latestSeq));
  }
  const records = await store.getMany(page.entries.map((e) => e.id));
  const messages: MessageView[] = [];
  page.entries.forEach((entry, i) => {
    const record = records[i];
    // Content too deep to serialise (stored before ingest limited depth) is unreadable
    // like expired content: a gap, never a failed page.
    if (record && !nestsDeeperThan(record.data, MAX_READABLE_DEPTH)) messages.push(messageView(entry, record));
    else addGap(gaps, entry.seq, entry.seq);
  });
  const last = page.entries[page.entries.length - 1];
  const next = last !== undefined ? last.seq : Math.max(afterSeq, Math.min(page.latestSeq, page.firstSeq - 1));
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
