/**
 * A partition's puts with a `clientMsgId` that are queued or being written (partition.ts):
 * the in-memory half of "one `clientMsgId` is stored once" (DESIGN.md §3). A put
 * registers itself here before it is queued, so a duplicate arriving meanwhile waits for
 * it and answers its MsgID; the batch writer forgets a batch's puts once it is written
 * (their `c` entries then answer the next duplicate: client-id-index.ts) or has failed
 * (a retry must be able to store it).
 */
import { duplicateOf, type PreparedRecord, type PutResult, type StoredMessage } from './record.js';

/** The puts of one partition in flight, by `clientMsgId`. */
export class InFlightPuts {
  /** Per `clientMsgId`, the put of it in flight and the bytes it asked to store. */
  readonly #byClientMsgId = new Map<string, { put: Promise<PutResult>; bytes: Buffer }>();

  /** Registers `put`, the put of `prep` just queued, under `clientMsgId` (prep's). */
  add(clientMsgId: string, prep: PreparedRecord, put: Promise<PutResult>): void {
    this.#byClientMsgId.set(clientMsgId, { put, bytes: prep.bytes });
  }

  /**
   * A duplicate's answer, once the put of `clientMsgId` in flight has one (record.ts
   * `duplicateOf`); undefined when none is in flight.
   */
  duplicate(clientMsgId: string): Promise<PutResult> | undefined {
    const first = this.#byClientMsgId.get(clientMsgId);
    return first?.put.then((r) => duplicateOf(r, first.bytes));
  }

  /** The record the put of `clientMsgId` in flight stores, once it has; undefined when none is in flight. */
  find(clientMsgId: string): Promise<StoredMessage> | undefined {
    return this.#byClientMsgId.get(clientMsgId)?.put.then((r) => r.message);
  }

  /**
   * Forgets the puts of a batch written or failed (or answered UNAVAILABLE by a stalled
   * write, write-stall.ts); a later put of the same `clientMsgId` in its place stays.
   */
  forget(preps: readonly PreparedRecord[]): void {
    for (const prep of preps) {
      const cid = prep.message.clientMsgId;
      if (cid !== undefined && this.#byClientMsgId.get(cid)?.bytes === prep.bytes) this.#byClientMsgId.delete(cid);
    }
  }

  /** Every put in flight, for a close to wait for. */
  all(): Promise<PutResult>[] {
    return [...this.#byClientMsgId.values()].map((p) => p.put);
  }
}
