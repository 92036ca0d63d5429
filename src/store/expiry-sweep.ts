/**
 * A partition's expiry sweep (DESIGN.md §3: retention), in steps: each deletes expired
 * records from the front of the expiry index, with their idempotency entries. The
 * caller runs each step with no batch write in flight (see `group-commit.ts`), so the
 * idempotency owners it reads cannot change before its deletes land.
 */
import { clientIdKey, expiredRange, messageKey, parseExpiryValue } from './keys.js';
import type { PartitionDb } from './partition-db.js';

/**
 * Records deleted per sweep step (a step ends after the expiry entry that reaches
 * it): bounds how long a sweep holds the writer.
 */
export const SWEEP_CHUNK_RECORDS = 500;

/** What one sweep step did: records deleted, and whether no due entry is left. */
export interface SweepStepResult {
  readonly deleted: number;
  readonly done: boolean;
}

/**
 * Deletes every record due at `nowMs`, one {@link sweepStep} of about
 * {@link SWEEP_CHUNK_RECORDS} records at a time, each run by `turn` (the partition's
 * turn between batch writes; it may answer `{deleted: 0, done: true}` instead of
 * running it), until none is due or `stopped()`.
 * @returns the records deleted
 * @throws what `turn` throws
 */
export async function sweepDue(
  db: PartitionDb, nowMs: number, stopped: () => boolean, turn: (step: () => Promise<SweepStepResult>) => Promise<SweepStepResult>,
): Promise<number> {
  let deleted = 0;
  while (!stopped()) {
    const step = await turn(() => sweepStep(db, nowMs, SWEEP_CHUNK_RECORDS));
    deleted += step.deleted;
    if (step.done) break;
  }
  return deleted;
}

/**
 * Deletes the records of the expiry entries due at `nowMs`, entry by entry, stopping
 * after the entry that brings the count to `maxRecords`.
 * @param db the partition database
 * @param nowMs the sweep's clock reading, ms since the epoch
 * @param maxRecords records per step, about (an entry is never split)
 * @returns records deleted, and whether no due entry is left
 * @throws the LevelDB error when a read or the delete batch fails
 */
export async function sweepStep(db: PartitionDb, nowMs: number, maxRecords: number): Promise<SweepStepResult> {
  const entries: [Buffer, { id: string; clientMsgId: string | undefined }[]][] = [];
  let listed = 0;
  let done = true;
  for await (const [key, value] of db.iterator(expiredRange(nowMs))) {
    const records = parseExpiryValue(value.toString('latin1'));
    entries.push([key, records]);
    listed += records.length;
    if (listed >= maxRecords) {
      done = false;
      break;
    }
  }
  if (entries.length === 0) return { deleted: 0, done: true };
  const cids = [...new Set(entries.flatMap(([, rs]) => rs.flatMap((r) => r.clientMsgId ?? [])))];
  const owners = cids.length === 0 ? [] : await db.getMany(cids.map(clientIdKey));
  const ownerOf = new Map(cids.map((cid, i) => [cid, owners[i]?.toString('latin1')]));
  const batch = db.batch();
  for (const [key, records] of entries) {
    batch.del(key);
    for (const { id, clientMsgId } of records) {
      batch.del(messageKey(id));
      // A newer message may own this client_msg_id now (stored after this one
      // expired): its entry stays.
      if (clientMsgId !== undefined && ownerOf.get(clientMsgId) === id) batch.del(clientIdKey(clientMsgId));
    }
  }
  // Not fsynced: a sweep lost in a crash is simply done again.
  await batch.write({ sync: false });
  return { deleted: listed, done };
}
