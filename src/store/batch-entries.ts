/**
 * What one batch write of a partition puts (partition.ts; the key layout: keys.ts): each
 * new record under its MsgID, its `c` idempotency entry when it has a `clientMsgId`, one
 * expiry entry per expiry second listing the batch's records that expire in it (keyed by
 * the first of them), and the counter's high-water mark, which every batch carries so
 * the counter outlives the records.
 */
import { HIGH_WATER_KEY, clientIdKey, expiryBucket, expiryKey, expiryLine, messageKey } from './keys.js';
import type { PartitionDb } from './partition-db.js';
import type { StoredMessage } from './record.js';

/** A partition database's chained batch: the puts of one write, written at once. */
export type PartitionBatch = ReturnType<PartitionDb['batch']>;

/** The entries of one batch write, put as its records are given their MsgIDs. */
export class BatchEntries {
  readonly #batch: PartitionBatch;
  /** One message key buffer for the whole batch (the batch copies each key as it is put). */
  readonly #keyScratch = Buffer.allocUnsafe(9);
  /** Expiry entries of this batch, by expiry second: first MsgID and listed lines. */
  readonly #expiring = new Map<number, { firstId: string; lines: string }>();

  constructor(batch: PartitionBatch) {
    this.#batch = batch;
  }

  /** Puts record `bytes` of `message` under its MsgID `id`, with its `c` entry, and lists it for its expiry second. */
  add(id: string, message: StoredMessage, bytes: Buffer): void {
    this.#batch.put(messageKey(id, this.#keyScratch), bytes);
    const cid = message.clientMsgId;
    if (cid !== undefined) this.#batch.put(clientIdKey(cid), Buffer.from(id, 'latin1'));
    const bucket = expiryBucket(message.expiresAt);
    const entry = this.#expiring.get(bucket);
    if (entry === undefined) this.#expiring.set(bucket, { firstId: id, lines: expiryLine(id, cid) });
    else entry.lines += expiryLine(id, cid);
  }

  /**
   * Puts the expiry entries and the high-water mark `counter` (the partition's last
   * counter assigned), after the last {@link add}.
   * @returns the batch, to write
   */
  seal(counter: number): PartitionBatch {
    for (const [bucket, { firstId, lines }] of this.#expiring) this.#batch.put(expiryKey(bucket, firstId), Buffer.from(lines, 'latin1'));
    this.#batch.put(HIGH_WATER_KEY, Buffer.from(String(counter), 'latin1'));
    return this.#batch;
  }
}
