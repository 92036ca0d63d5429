/**
 * The read cache in front of the store (DESIGN.md §3): recently written and read
 * records, keyed by MsgID, bounded by the memory they take: each counts its stored
 * JSON bytes and {@link ENTRY_OVERHEAD_BYTES}. It is what makes room and broadcast
 * content a single disk read, not one per recipient.
 *
 * A written record is kept as its stored bytes alone and decoded on its first read
 * (a put pays for no parse and no extra object: the expiry is read from the bytes,
 * see `expiresAtOf`); from then on the decoded record replaces the bytes. Written
 * bytes are slices of shared slabs (see `record-arena.ts`); the cache keeps a copy of
 * its own, so no cached record keeps a slab alive. An expired record is never served.
 */
import { LRUCache } from 'lru-cache';
import { decodeRecord, expiresAtOf, type StoredMessage } from './record.js';

/**
 * What a cached record takes besides its stored bytes: the decoded object and its
 * strings' headers, the key, the LRU's slots. Measured on Node 20 (heap after a full
 * GC, 100,000 records): a decoded record of 313 stored bytes took 639 B, one of 1,753
 * took 2,078 B (one more byte per byte of ASCII text); an undecoded one ~260 B besides
 * its bytes. Counting the stored bytes alone let a 64 MiB cache hold ~150 MB (a soak
 * test's finding).
 */
export const ENTRY_OVERHEAD_BYTES = 320;

/** LRU of records by MsgID; a size of 0 turns it off. */
export class RecordCache {
  /** Values: stored bytes (written, not yet read) or the decoded record. */
  readonly #lru: LRUCache<string, Buffer | StoredMessage> | undefined;

  /** @param maxBytes memory the cached records may take, bytes (their JSON and {@link ENTRY_OVERHEAD_BYTES} each); 0: no cache */
  constructor(maxBytes: number) {
    // Every set passes its size, so no size function is needed.
    this.#lru = maxBytes > 0 ? new LRUCache<string, Buffer | StoredMessage>({ maxSize: maxBytes }) : undefined;
  }

  /**
   * @returns the record; `null` when it is cached but expired at `nowMs`; `undefined`
   *   when it is not cached
   */
  get(id: string, nowMs: number): StoredMessage | null | undefined {
    const lru = this.#lru;
    const value = lru?.get(id);
    if (lru === undefined || value === undefined) return undefined;
    if (!Buffer.isBuffer(value)) {
      if (value.expiresAt > nowMs) return value;
      lru.delete(id);
      return null;
    }
    if (!(expiresAtOf(value) > nowMs)) {
      lru.delete(id);
      return null;
    }
    const message = decodeRecord(value, id);
    this.#set(id, message, value.length);
    return message;
  }

  /**
   * Keeps a written record's stored bytes, decoded on its first read. Bytes that are a
   * slice of a larger buffer (an arena slab, record-arena.ts) are copied first: kept as
   * a slice, each cached record kept its whole 64 KiB slab alive, and as ingest caches
   * only records with a recipient online (and local delivery never reads them back), a
   * cache of 256 KiB held 24.8 MiB of slabs (a review's finding; ~7 GB at the default
   * 64 MiB).
   */
  setWritten(id: string, bytes: Buffer): void {
    if (this.#lru === undefined) return;
    let own = bytes;
    if (bytes.byteLength !== bytes.buffer.byteLength) {
      own = Buffer.allocUnsafeSlow(bytes.length);
      bytes.copy(own);
    }
    this.#set(id, own, own.length);
  }

  /**
   * Drops every record whose MsgID starts with `prefix` (e.g. a partition's two hex
   * digits). Walks the whole cache: for rare events, not the read path.
   */
  deleteStartingWith(prefix: string): void {
    const lru = this.#lru;
    if (lru === undefined) return;
    for (const id of [...lru.keys()]) if (id.startsWith(prefix)) lru.delete(id);
  }

  /** Keeps a record read from disk (or from another node), already decoded; `size` is its stored bytes. */
  setRead(message: StoredMessage, size: number): void {
    this.#set(message.id, message, size);
  }

  /** Caches `value` as taking its stored bytes and {@link ENTRY_OVERHEAD_BYTES}. */
  #set(id: string, value: Buffer | StoredMessage, storedBytes: number): void {
    this.#lru?.set(id, value, { size: storedBytes + ENTRY_OVERHEAD_BYTES });
  }
}
