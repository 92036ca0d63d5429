/**
 * A partition's `clientMsgId` index (the `c` keys, keys.ts `clientIdKey`): which live
 * record was first stored under a `clientMsgId`, the answer to a duplicate put
 * (src/store/partition.ts). Read on the partition's own database.
 */
import type { Logger } from '../logger.js';
import { clientIdKey, messageKey } from './keys.js';
import type { PartitionDb } from './partition-db.js';
import { decodeRecord, type PreparedRecord, type PutResult, type StoredMessage } from './record.js';

/**
 * Per `clientMsgId` of `cids`, the live record first stored under it, as a duplicate
 * put's answer; undefined where none is stored, it has expired (by `now()`, read after
 * the records: the partition's is the store's clock but never more than 1 s past
 * Redis's, SweepClock.liveNow, so a node ahead takes no record for expired that still
 * lives by Redis's clock), or its bytes cannot be decoded. The `c` keys are read
 * synchronously (`getSync`: a key never written is refuted by LevelDB's memtable and
 * bloom filters in microseconds, less than a hand-off to the libuv pool, where it would
 * queue behind other partitions' fsyncs; docs/decisions.md "The `client_msg_id` check
 * reads its keys synchronously"). The records of the keys found (retries, rare) are
 * real reads of data blocks, maybe from a cold table: always one `getMany` on the pool,
 * never on the event loop, where a slow or stalled disk would hold the whole process (a
 * review measured 11 ms for one cold read).
 * @throws as classic-level's reads (the partition answers them as UNAVAILABLE)
 */
export async function storedUnder(
  db: PartitionDb, now: () => number, logger: Logger | undefined, cids: readonly string[],
): Promise<(PutResult | undefined)[]> {
  const out = new Array<PutResult | undefined>(cids.length).fill(undefined);
  const found: { k: number; id: string }[] = [];
  cids.forEach((cid, k) => {
    const id = db.getSync(clientIdKey(cid))?.toString('latin1');
    if (id !== undefined) found.push({ k, id });
  });
  if (found.length === 0) return out;
  const keys = found.map((f) => messageKey(f.id));
  const records = await db.getMany(keys);
  const at = now();
  found.forEach(({ k, id }, j) => {
    const bytes = records[j];
    const first = bytes === undefined ? null : decodedFirst(bytes, id, cids[k] as string, logger);
    if (first !== null && first.expiresAt > at && bytes !== undefined) out[k] = { id, duplicate: true, message: first, bytes };
  });
  return out;
}

/**
 * Per prepared record of a batch, its duplicate put's answer when its `clientMsgId` is
 * stored and live ({@link storedUnder}); undefined for the others and those without one.
 * @throws as {@link storedUnder}
 */
export async function duplicatesIn(
  db: PartitionDb, now: () => number, logger: Logger | undefined, preps: readonly PreparedRecord[],
): Promise<(PutResult | undefined)[]> {
  const out = new Array<PutResult | undefined>(preps.length).fill(undefined);
  const asked: number[] = [];
  const cids: string[] = [];
  preps.forEach((p, i) => {
    const cid = p.message.clientMsgId;
    if (cid === undefined) return;
    asked.push(i);
    cids.push(cid);
  });
  if (cids.length === 0) return out;
  const firsts = await storedUnder(db, now, logger, cids);
  asked.forEach((i, k) => { out[i] = firsts[k]; });
  return out;
}

/**
 * The record first stored under `cid`, or null when its bytes cannot be decoded
 * (src/store/unreadable.ts): it is then taken for gone, as an expired one is, so a
 * retry is stored anew — its content is what the recipients can still get (the first
 * is an `undeliverable` gap wherever it was appended), where a refusal would hold the
 * key for good (docs/decisions.md "Unreadable records"). Logged at error.
 */
function decodedFirst(bytes: Buffer, id: string, cid: string, logger: Logger | undefined): StoredMessage | null {
  try {
    return decodeRecord(bytes, id);
  } catch (err) {
    logger?.error({ msgId: id, clientMsgId: cid, err }, 'the message first stored under this client_msg_id cannot be decoded: taken for gone, as an expired one (a retry is stored as a new message)');
    return null;
  }
}
