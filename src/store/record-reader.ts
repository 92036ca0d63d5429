/**
 * What the readers of message content (delivery, history, `GET /v1/messages/{id}`)
 * need from the store. The local {@link MessageStore} is one (its own partitions
 * only); src/cluster/store-router.ts is the one the service hands out, which also
 * reads other nodes' partitions from their owners (DESIGN.md §9).
 */
import type { ReadRecord } from './unreadable.js';

/** Reads records by MsgID. */
export interface RecordReader {
  /** False once the local store is closed (readiness, `GET /readyz`). */
  readonly isOpen: boolean;
  /**
   * One record; null when it is missing or expired; the unreadable mark when its
   * stored bytes cannot be decoded (src/store/unreadable.ts).
   * @throws PixiuError UNAVAILABLE when the record cannot be read now (retry later)
   */
  get(id: string): Promise<ReadRecord | null>;
  /**
   * Records in the order asked; null where missing or expired (also for a malformed
   * id). A null means the record is not there: readers show it as a `gap` (reason
   * `expired`). The unreadable mark (src/store/unreadable.ts) means it is there but its
   * bytes cannot be decoded, for good: readers show a `gap` of reason `undeliverable`.
   * @throws PixiuError UNAVAILABLE when some record cannot be read now (a store
   *   failed, or the node owning its partition is unreachable): never a null nor the
   *   unreadable mark then
   */
  getMany(ids: readonly string[]): Promise<(ReadRecord | null)[]>;
}
