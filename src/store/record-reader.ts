/**
 * What the readers of message content (delivery, history, `GET /v1/messages/{id}`)
 * need from the store. The local {@link MessageStore} is one (its own partitions
 * only); src/cluster/store-router.ts is the one the service hands out, which also
 * reads other nodes' partitions from their owners (DESIGN.md §9).
 */
import type { StoredMessage } from './record.js';

/** Reads records by MsgID. */
export interface RecordReader {
  /** False once the local store is closed (readiness, `GET /readyz`). */
  readonly isOpen: boolean;
  /**
   * One record; null when it is missing or expired.
   * @throws PixiuError UNAVAILABLE when the record cannot be read now (retry later)
   */
  get(id: string): Promise<StoredMessage | null>;
  /**
   * Records in the order asked; null where missing or expired (also for a malformed
   * id). A null means the record is not there: readers show it as a `gap`.
   * @throws PixiuError UNAVAILABLE when some record cannot be read now (a store
   *   failed, or the node owning its partition is unreachable): never a null then
   */
  getMany(ids: readonly string[]): Promise<(StoredMessage | null)[]>;
}
