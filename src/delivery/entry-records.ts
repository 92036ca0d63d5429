/**
 * The records of a page's inbox entries, as delivery (session.ts) and history
 * (src/api/history.ts) read them: an entry whose own `exp` (src/inbox/codec.ts
 * InboxEntry, written by append-13.lua) is at or before now is expired without a store read, as
 * the store itself would answer it (its records expire at `expiresAt <= now`,
 * src/store/message-store.ts `getMany`). So an expired message stored by a node that
 * is gone for good (stopped after its messages' ttl, README "Several nodes") is an
 * `expired` gap, not a read of an owner that cannot answer (UNAVAILABLE, which stalls
 * its user for good): docs/decisions.md "An inbox entry records its message's expiry".
 * It also saves the store those reads. A reader's helper beside message-view.ts, which
 * history also takes from delivery: src/inbox holds the inbox and never reads the store.
 */
import type { PageEntry } from '../inbox/codec.js';
import type { RecordReader } from '../store/record-reader.js';
import type { ReadRecord } from '../store/unreadable.js';

/**
 * Whether `entry`'s message is known to have expired from the entry alone: its `exp` is
 * at or before `nowMs`. False for an entry with no `exp` (written by an older release)
 * and for a malformed one (it names no message: an `undeliverable` gap, decided by its
 * readers).
 */
export function expiredByEntry(entry: PageEntry, nowMs: number): boolean {
  return entry.malformed !== true && entry.exp !== undefined && entry.exp <= nowMs;
}

/**
 * The records of `entries`, in their order, as {@link RecordReader.getMany} gives them,
 * with null (expired) for each entry {@link expiredByEntry} finds expired at `nowMs`,
 * whose record is not read; no store read at all when every entry has expired.
 * @param nowMs now, ms since the Unix epoch (delivery: its machine's clock; history: `Date.now()`)
 * @throws PixiuError UNAVAILABLE as `getMany` does, for the records it reads (never for
 *   an entry that has expired by its `exp`)
 */
export async function readEntryRecords(
  store: RecordReader, entries: readonly PageEntry[], nowMs: number,
): Promise<(ReadRecord | null)[]> {
  const live: number[] = [];
  entries.forEach((entry, i) => {
    if (!expiredByEntry(entry, nowMs)) live.push(i);
  });
  if (live.length === entries.length) return entries.length === 0 ? [] : store.getMany(entries.map((e) => e.id));
  const out = new Array<ReadRecord | null>(entries.length).fill(null);
  if (live.length === 0) return out;
  const read = await store.getMany(live.map((i) => (entries[i] as PageEntry).id));
  live.forEach((i, k) => {
    out[i] = read[k] ?? null;
  });
  return out;
}
