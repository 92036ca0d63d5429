/**
 * The read cache in front of the store (DESIGN.md §3): recently written and read
 * records, keyed by MsgID, bounded by the bytes of their stored JSON. It is what
 * makes room and broadcast content a single disk read, not one per recipient.
 *
 * A written record is kept as its stored bytes alone and decoded on its first read
 * (a put pays for no parse and no extra object: the expiry is read from the bytes,
 * see `expiresAtOf`); from then on the decoded record replaces the bytes. Written
 * bytes are slices of shared slabs (see `record-arena.ts`), so a slab lives while any
 * of its records is cached undecoded; records of one slab are written, cached and
 * evicted together, and a record read even once no longer holds its slab. An expired
 * record is never served.
 */
import { LRUCache } from 'lru-cache';
import { decodeRecord, expiresAtOf, type StoredMessage } from './record.js';

/** LRU of records by MsgID; a size of 0 turns it off. */
export class RecordCache {
  /** Values: stored bytes (written, not yet read) or the decoded record. */
  readonly #lru: LRUCache<string, Buffer | StoredMessage> | undefined;

  /** @param maxBytes total bytes of cached record JSON; 0: no cache */
  constructor(maxBytes: number) {
    // Every set passes its size (the stored bytes), so no size function is needed.
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
    lru.set(id, message, { size: value.length });
    return message;
  }

  /** Keeps a written record's stored bytes, decoded on its first read. */
  setWritten(id: string, bytes: Buffer): void {
    this.#lru?.set(id, bytes, { size: bytes.length });
  }

  /** Keeps a record read from disk, already decoded; `size` is its stored bytes. */
  setRead(message: StoredMessage, size: number): void {
    this.#lru?.set(message.id, message, { size });
  }
}
