/**
 * Record reads across nodes (DESIGN.md §3 "reads route by the partition byte inside
 * the MsgID", §9): the {@link RecordReader} the service hands to delivery, history and
 * `GET /v1/messages/{id}`. Ids of this node's partitions are read from its own
 * store; the others from the node owning their partition, over its internal route
 * (records-route.ts), one request per owner per call (per {@link MAX_RECORD_IDS}
 * ids), at the same time as the local read, and merged back in the order asked.
 *
 * What a read of another node's partition answers:
 * - the owner answers: its records (null where it has none, or expired);
 * - the partition is claimed by no store: null (nobody minted ids there);
 * - the owner has no lease (stopped), cannot be reached, times out, refuses, or
 *   answers something else: PixiuError UNAVAILABLE for the whole read — never a
 *   null, which readers would show as a `gap` and the user would lose the message.
 *   Delivery retries later; history answers 503 with Retry-After.
 */
import { PixiuError, unavailable } from '../errors.js';
import { tryDecodeMsgId } from '../ids/msg-id.js';
import type { Logger } from '../logger.js';
import type { RecordReader } from '../store/record-reader.js';
import { recordOf, type StoredMessage } from '../store/record.js';
import { MAX_RECORD_IDS, RECORDS_PATH, type RecordsAnswer } from './records-route.js';
import type { OwnerLookup } from './store-directory.js';
import type { StoreLease } from './partition-claims.js';

/** The local store as the router uses it (MessageStore is one). */
export interface LocalRecords extends RecordReader {
  /** True when MsgID partition byte `partition` is one of the local store's. */
  hasPartition(partition: number): boolean;
}

/** How the router authenticates to other nodes (cluster-secret.ts). */
export interface PeerAuth {
  /** The `Authorization` header value. */
  readonly header: string;
  /**
   * Re-reads the secret after a 401. @returns true when it changed (worth one retry)
   */
  refresh(): Promise<boolean>;
}

/** Options of {@link StoreRouter}. */
export interface StoreRouterOptions {
  readonly local: LocalRecords;
  readonly owners: OwnerLookup;
  readonly auth: PeerAuth;
  /** Bound on one request to another node, body included, ms (PIXIU_REDIS_COMMAND_TIMEOUT). */
  readonly timeoutMs: number;
  readonly logger?: Logger;
}

/** Where the ids of one owner sit in the answer. */
interface RemoteBatch {
  readonly storeId: string;
  readonly lease: StoreLease;
  readonly at: number[];
  readonly ids: string[];
}

/** Reads records wherever their partition is. */
export class StoreRouter implements RecordReader {
  readonly #opts: StoreRouterOptions;

  constructor(opts: StoreRouterOptions) {
    this.#opts = opts;
  }

  get isOpen(): boolean {
    return this.#opts.local.isOpen;
  }

  /** One record; see {@link getMany}. */
  async get(id: string): Promise<StoredMessage | null> {
    const [record] = await this.getMany([id]);
    return record ?? null;
  }

  /**
   * Records in the order asked; null where missing, expired, malformed, or of a
   * partition no store claims.
   * @throws PixiuError UNAVAILABLE when the local store fails, or a partition's owner
   *   cannot be read now (no lease, unreachable, timed out, refused): never a null then
   */
  async getMany(ids: readonly string[]): Promise<(StoredMessage | null)[]> {
    const { local } = this.#opts;
    const localAt: number[] = [];
    const remote = new Map<number, number[]>();
    ids.forEach((id, at) => {
      const partition = typeof id === 'string' ? tryDecodeMsgId(id)?.partition : undefined;
      if (partition === undefined || local.hasPartition(partition)) {
        localAt.push(at);
        return;
      }
      let list = remote.get(partition);
      if (list === undefined) remote.set(partition, (list = []));
      list.push(at);
    });
    if (remote.size === 0) return local.getMany(ids);

    const out = new Array<StoredMessage | null>(ids.length).fill(null);
    const batches = await this.#batches(ids, remote);
    const reads: Promise<void>[] = [];
    if (localAt.length > 0) {
      reads.push(local.getMany(localAt.map((at) => ids[at] as string)).then((records) => {
        records.forEach((r, i) => { out[localAt[i] as number] = r; });
      }));
    }
    for (const batch of batches) {
      for (let from = 0; from < batch.ids.length; from += MAX_RECORD_IDS) {
        const chunk = batch.ids.slice(from, from + MAX_RECORD_IDS);
        reads.push(this.#fetch(batch, chunk).then((records) => {
          records.forEach((r, i) => { out[batch.at[from + i] as number] = r; });
        }));
      }
    }
    await Promise.all(reads);
    return out;
  }

  /**
   * Groups the remote ids by owning store.
   * @throws PixiuError UNAVAILABLE for a claimed partition without a lease
   */
  async #batches(ids: readonly string[], remote: ReadonlyMap<number, number[]>): Promise<RemoteBatch[]> {
    const owners = await this.#opts.owners.owners(remote.keys());
    const byStore = new Map<string, RemoteBatch>();
    for (const [partition, ats] of remote) {
      const owner = owners.get(partition);
      if (owner === undefined || owner.state === 'unclaimed') continue; // answered null
      if (owner.lease === undefined) {
        throw unavailable(`message partition ${partition} is held by store ${owner.storeId}, whose node is not running; retry later`);
      }
      let batch = byStore.get(owner.storeId);
      if (batch === undefined) byStore.set(owner.storeId, (batch = { storeId: owner.storeId, lease: owner.lease, at: [], ids: [] }));
      for (const at of ats) {
        batch.at.push(at);
        batch.ids.push(ids[at] as string);
      }
    }
    return [...byStore.values()];
  }

  /**
   * One request to the node of `batch.storeId` for `ids` (at most MAX_RECORD_IDS).
   * @throws PixiuError UNAVAILABLE for anything but a good answer from that store
   */
  async #fetch(batch: RemoteBatch, ids: readonly string[]): Promise<(StoredMessage | null)[]> {
    const { storeId, lease } = batch;
    try {
      for (let attempt = 1; ; attempt++) {
        const res = await fetch(`${lease.url.replace(/\/+$/, '')}${RECORDS_PATH}`, {
          method: 'POST',
          headers: { authorization: this.#opts.auth.header, 'content-type': 'application/json' },
          body: JSON.stringify({ ids }),
          signal: AbortSignal.timeout(this.#opts.timeoutMs),
        });
        if (res.status === 401 && attempt === 1) {
          await res.body?.cancel();
          // The secret may have been recreated (Redis lost it): re-read it, try once more.
          if (await this.#opts.auth.refresh()) continue;
        }
        if (!res.ok) {
          await res.body?.cancel();
          throw new Error(`answered HTTP ${res.status}`);
        }
        return recordsOf(await res.json() as RecordsAnswer, storeId, ids);
      }
    } catch (err) {
      this.#opts.owners.forget(storeId);
      if (err instanceof PixiuError && err.code === 'UNAVAILABLE') throw err;
      this.#opts.logger?.warn({ err, store: storeId, url: lease.url, node: lease.node }, 'remote record read failed');
      throw unavailable(`the node holding message store ${storeId} cannot be read now; retry later`, err);
    }
  }
}

/**
 * The records of an answer, checked: from the store asked, one per id asked, each
 * null or a record of that id.
 * @throws Error when the answer is not that
 */
function recordsOf(answer: RecordsAnswer, storeId: string, ids: readonly string[]): (StoredMessage | null)[] {
  if (answer?.store !== storeId) throw new Error(`answered for store ${String(answer?.store)}, not ${storeId}`);
  if (!Array.isArray(answer.records) || answer.records.length !== ids.length) throw new Error('answered the wrong number of records');
  return answer.records.map((value, i) => {
    const id = ids[i] as string;
    if (value === null) return null;
    if ((value as { id?: unknown }).id !== id) throw new Error(`answered another record for ${id}`);
    return recordOf(value, id);
  });
}
