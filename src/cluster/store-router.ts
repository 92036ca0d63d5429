/**
 * Record reads across nodes (DESIGN.md §3 "reads route by the partition byte inside
 * the MsgID", §9): the {@link RecordReader} the service hands to delivery, history and
 * `GET /v1/messages/{id}`. Ids of this node's partitions are read from its own
 * store; the others from the node owning their partition, over its internal route
 * (records-route.ts), one request per owner per call (per {@link MAX_RECORD_IDS}
 * ids), at the same time as the local read, and merged back in the order asked.
 *
 * What a read of another node's partition answers:
 * - the owner answers: its records (null where it has none, or expired; the
 *   unreadable mark where it cannot decode the record, or where what it sent for an id
 *   is no record: src/store/unreadable.ts, never cached);
 * - the partition is retired (its data dir is gone for good, an operator said so): null,
 *   also for a record this node has cached (dropped then), from the moment the owner
 *   directory says so (its claims are cached 5 s, store-directory.ts);
 * - the partition is claimed by no store now (Redis lost the claims and the owner has
 *   not re-asserted its claim yet), the owner has no lease (stopped), cannot be
 *   reached, times out, refuses, or
 *   answers something else: PixiuError UNAVAILABLE for the whole read — never a
 *   null, which readers would show as a `gap` and the user would lose the message.
 *   Delivery retries later; history answers 503 with Retry-After. A record this node
 *   read before and still has cached is served from the cache then (an owner down, or
 *   Redis lost the claims): it is immutable, and what the owner would answer
 *   (docs/decisions.md, "Several nodes").
 */
import { PixiuError, outageFields, unavailable } from '../errors.js';
import { tryDecodeMsgId } from '../ids/msg-id.js';
import { LogThrottle, OUTAGE_LOG_INTERVAL_MS, thinnedFields } from '../log-throttle.js';
import type { Logger } from '../logger.js';
import type { RecordReader } from '../store/record-reader.js';
import { RecordCache } from '../store/record-cache.js';
import { recordOf } from '../store/record.js';
import { isUnreadable, unreadableRecord, UnreadableLog, type ReadRecord } from '../store/unreadable.js';
import { MAX_RECORD_IDS, RECORDS_PATH, type RecordsAnswer } from './records-route.js';
import { RETIRED_STORE, type OwnerLookup, type PartitionOwner } from './store-directory.js';
import type { StoreLease } from './partition-claims.js';

/** The cause of the UNAVAILABLE for a partition no store claims now. */
const UNCLAIMED = new Error('no store claims the partition now');

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
  /** Bound on one request to another node, body included, ms (PIXIU_PEER_READ_TIMEOUT). */
  readonly timeoutMs: number;
  /**
   * Budget of the cache of records read from other nodes, bytes (approximate: the
   * JSON length of each record's `data` and the cache's own overhead per record,
   * record-cache.ts); 0 turns it off.
   */
  readonly cacheBytes: number;
  readonly logger?: Logger;
  /** This node's store id: a partition the owner directory names as its is read locally. */
  readonly localStoreId?: string;
  /**
   * True while another store holds (part of) this node's block (its claim lost: a new
   * data dir took it while this node was cut off from Redis, src/cluster/store-ownership.ts).
   * The local store's partitions are then read from whichever store the directory names:
   * that store may have minted ids this store also holds, for other messages, and
   * readers must see what the inboxes now mean. Unset: never.
   */
  readonly blockLost?: () => boolean;
}

/** A read of one remote record that other reads of the same id wait on. */
interface SharedRead {
  readonly partition: number;
  /** Where the record goes in this call's answer. */
  readonly at: number[];
  readonly promise: Promise<ReadRecord | null>;
  resolve(record: ReadRecord | null): void;
  reject(err: unknown): void;
}

function sharedRead(partition: number, at: number): SharedRead {
  let resolve!: (record: ReadRecord | null) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<ReadRecord | null>((res, rej) => { resolve = res; reject = rej; });
  // Its failure is the failure of the call that started it (which throws it); the
  // calls that wait on it see it too. Never unhandled.
  promise.catch(() => undefined);
  return { partition, at: [at], promise, resolve, reject };
}

/** The ids one owner is asked for. */
interface RemoteBatch {
  readonly storeId: string;
  /** Undefined for this node's own store (read locally). */
  readonly lease: StoreLease | undefined;
  readonly ids: string[];
}

/**
 * Reads records wherever their partition is. Records read from other nodes are kept
 * in a cache (by bytes) and a record being read is read once: a room message read by
 * every member's session, or a page read by several devices, costs one request to its
 * owner per node, not one per reader (DESIGN.md §3, "read from disk once").
 */
export class StoreRouter implements RecordReader {
  readonly #opts: StoreRouterOptions;
  readonly #recent: RecordCache;
  /** Failed reads of other nodes, logged at most once per {@link OUTAGE_LOG_INTERVAL_MS}. */
  readonly #readFailures = new LogThrottle(OUTAGE_LOG_INTERVAL_MS);
  /** Records another node sent that this one cannot decode, logged once each. */
  readonly #unreadable: UnreadableLog;
  /** Remote reads in flight, by MsgID. */
  readonly #reading = new Map<string, Promise<ReadRecord | null>>();
  /**
   * Partition → the store and node (`<store id> <node id>`) whose records of it are in
   * the cache. An id names other content once another store holds the partition, or
   * once the same store's node starts again behind ids it minted before (Redis lost the
   * claims and counters: a new data dir took a stopped node's block; a copy ran): what
   * the cache holds of that partition is dropped then (a fresh tester's finding).
   */
  readonly #sources = new Map<number, string>();

  constructor(opts: StoreRouterOptions) {
    this.#opts = opts;
    this.#recent = new RecordCache(opts.cacheBytes);
    this.#unreadable = new UnreadableLog(opts.logger);
  }

  get isOpen(): boolean {
    return this.#opts.local.isOpen;
  }

  /**
   * One record asked for by its id (`GET /v1/messages/{id}`): as {@link getMany}, but
   * an id of a partition no store claims now is null (404), not UNAVAILABLE — the id
   * comes from a caller, who may have made it up, not from an inbox.
   */
  async get(id: string): Promise<ReadRecord | null> {
    try {
      const [record] = await this.getMany([id]);
      return record ?? null;
    } catch (err) {
      if (err instanceof PixiuError && err.cause === UNCLAIMED) return null;
      throw err;
    }
  }

  /**
   * Records in the order asked (ids read from inboxes: delivery, history); null where
   * missing, expired, malformed, or of a retired partition.
   * @throws PixiuError UNAVAILABLE when the local store fails, a partition is claimed
   *   by no store now (Redis lost the claims), or its owner cannot be read now (no
   *   lease, unreachable, timed out, refused): never a null then
   */
  async getMany(ids: readonly string[]): Promise<(ReadRecord | null)[]> {
    const { local } = this.#opts;
    const now = Date.now();
    const out = new Array<ReadRecord | null>(ids.length).fill(null);
    const localAt: number[] = [];
    const waits: Promise<unknown>[] = [];
    const mine = new Map<string, SharedRead>();
    const lost = this.#opts.blockLost?.() ?? false;
    // One pass: each id's partition, and the other nodes' partitions asked for.
    const partitions = ids.map((id) => (typeof id === 'string' ? tryDecodeMsgId(id)?.partition : undefined));
    const remote = new Set<number>();
    for (const p of partitions) if (p !== undefined && (lost || !local.hasPartition(p))) remote.add(p);
    // This node's partitions only (the hot path): no owner lookup, no await.
    if (remote.size === 0) return local.getMany(ids);
    // Looked up once, for the retired check, the cache's and the reads that miss it; its
    // failure fails those reads only (never unhandled).
    const owners = this.#opts.owners.owners(remote);
    owners.catch(() => undefined);
    // When the lookup fails (Redis down), cached records are served as they are.
    const known = await owners.then((found) => (this.#opts.cacheBytes > 0 ? this.#dropChanged(found) : found), () => undefined);
    ids.forEach((id, at) => {
      const partition = partitions[at];
      if (partition === undefined || !remote.has(partition)) {
        localAt.push(at);
        return;
      }
      // A retired partition's ids are null (missing), whatever is cached or being read of
      // them, with a cache or without: a read under way that this call would join began
      // before the retirement, and answers the owner's record (review35 3).
      if (known?.get(partition)?.state === 'retired') return;
      // Expired (null, and evicted) reads through like a miss: the owner answers it.
      const cached = this.#recent.get(id, now);
      if (cached) {
        out[at] = cached;
        return;
      }
      const own = mine.get(id);
      if (own !== undefined) {
        own.at.push(at);
        return;
      }
      const shared = this.#reading.get(id);
      if (shared !== undefined) {
        waits.push(shared.then((r) => { out[at] = r; }));
        return;
      }
      const read = sharedRead(partition, at);
      mine.set(id, read);
      this.#reading.set(id, read.promise);
    });

    if (localAt.length > 0) {
      waits.push(local.getMany(localAt.map((at) => ids[at] as string)).then((records) => {
        records.forEach((r, i) => { out[localAt[i] as number] = r; });
      }));
    }
    if (mine.size > 0) {
      waits.push(this.#readRemote(mine, owners));
      for (const read of mine.values()) waits.push(read.promise.then((r) => { for (const at of read.at) out[at] = r; }));
    }
    await Promise.all(waits);
    return out;
  }

  /**
   * Drops the cached records of each partition whose owner (store, or its node once it
   * holds a lease) is not the one they were read from, or that is retired now (the
   * directory's cache: claims 5 s, leases 2 s). A walk of the cache per change, never
   * per read: each partition's source is remembered.
   * @returns `owners`
   */
  #dropChanged(owners: ReadonlyMap<number, PartitionOwner>): ReadonlyMap<number, PartitionOwner> {
    for (const [partition, owner] of owners) {
      // A node not running now keeps what was read of it: it holds the same records,
      // immutable and stored durably (docs/decisions.md, "Several nodes"). So does a
      // partition no store claims now (Redis lost the claims): not known to be gone.
      const source = owner.state === 'retired' ? RETIRED_STORE
        : owner.state === 'owned' && owner.lease !== undefined ? `${owner.storeId} ${owner.lease.node}` : undefined;
      if (source === undefined) continue;
      const was = this.#sources.get(partition);
      if (was === source) continue;
      if (was !== undefined) this.#recent.deleteStartingWith(partition.toString(16).padStart(2, '0'));
      this.#sources.set(partition, source);
    }
    return owners;
  }

  /**
   * Reads `reads` from their owners, settling each; rejects with the first failure
   * (after rejecting every read still open).
   */
  async #readRemote(reads: ReadonlyMap<string, SharedRead>, owners: Promise<ReadonlyMap<number, PartitionOwner>>): Promise<void> {
    try {
      const batches = this.#batches(reads, await owners);
      await Promise.all(batches.flatMap((batch) => {
        const chunks: string[][] = [];
        for (let from = 0; from < batch.ids.length; from += MAX_RECORD_IDS) chunks.push(batch.ids.slice(from, from + MAX_RECORD_IDS));
        return chunks.map(async (chunk) => {
          const { lease } = batch;
          const own = lease === undefined;
          const records = own ? await this.#opts.local.getMany(chunk) : await this.#fetch({ ...batch, lease }, chunk);
          chunk.forEach((id, i) => {
            const record = records[i] ?? null;
            const read = reads.get(id);
            // Not kept: the unreadable mark (a record repaired at its owner is read as itself
            // next time), nor a record of a partition retired while it was read (#dropChanged
            // emptied it before; kept, it was served again whenever an owner lookup failed).
            if (record !== null && !own && !isUnreadable(record) && this.#sources.get(read?.partition ?? -1) !== RETIRED_STORE) {
              this.#recent.setRead(record, JSON.stringify(record.data).length);
            }
            read?.resolve(record);
          });
        });
      }));
      for (const read of reads.values()) read.resolve(null); // retired partitions (settled ones ignore it)
    } catch (err) {
      for (const read of reads.values()) read.reject(err);
      throw err;
    } finally {
      for (const [id, read] of reads) if (this.#reading.get(id) === read.promise) this.#reading.delete(id);
    }
  }

  /**
   * Groups the ids by owning store; ids of retired partitions are left out (null).
   * @throws PixiuError UNAVAILABLE for a partition no store claims now, or one claimed
   *   by a store without a lease
   */
  #batches(reads: ReadonlyMap<string, SharedRead>, owners: ReadonlyMap<number, PartitionOwner>): RemoteBatch[] {
    const byStore = new Map<string, RemoteBatch>();
    for (const [id, { partition }] of reads) {
      const owner = owners.get(partition);
      if (owner?.state === 'retired') continue;
      // This node's own partition (read through here while the rest of its block is held
      // elsewhere): its own as Redis names it, or claimed by no store (no one else mints there).
      if (this.#opts.local.hasPartition(partition) && (owner === undefined || owner.state === 'unclaimed' || owner.storeId === this.#opts.localStoreId)) {
        const key = this.#opts.localStoreId ?? '';
        let batch = byStore.get(key);
        if (batch === undefined) byStore.set(key, (batch = { storeId: key, lease: undefined, ids: [] }));
        batch.ids.push(id);
        continue;
      }
      if (owner === undefined || owner.state === 'unclaimed') {
        // Not known to be gone: Redis lost the claims (its owner writes them back within
        // a heartbeat), so a gap here would lose a message that is still stored.
        throw unavailable(`message partition ${partition} is claimed by no store now (Redis lost the claims?); retry later`, UNCLAIMED);
      }
      if (owner.lease === undefined) {
        // All this node knows is that the lease is gone from Redis: not why. A forward step
        // of Redis's clock lapses every lease at once, of running nodes too, until their
        // next renewal (≤ 5 s): "whose node is not running" sent operators after a node
        // that ran (walk40 F5).
        throw unavailable(`message partition ${partition} is held by store ${owner.storeId}, whose lease has lapsed (its node stopped or could not renew it in time, or Redis's clock stepped forward); retry later`);
      }
      let batch = byStore.get(owner.storeId);
      if (batch === undefined) byStore.set(owner.storeId, (batch = { storeId: owner.storeId, lease: owner.lease, ids: [] }));
      batch.ids.push(id);
    }
    return [...byStore.values()];
  }

  /**
   * One request to the node of `batch.storeId` for `ids` (at most MAX_RECORD_IDS).
   * @throws PixiuError UNAVAILABLE for anything but a good answer from that store
   */
  async #fetch(batch: RemoteBatch & { readonly lease: StoreLease }, ids: readonly string[]): Promise<(ReadRecord | null)[]> {
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
        return recordsOf(await res.json() as RecordsAnswer, storeId, ids,
          (id, err) => this.#unreadable.report(id, tryDecodeMsgId(id)?.partition ?? -1, `store ${storeId} at ${lease.url}`, err));
      }
    } catch (err) {
      this.#opts.owners.forget(storeId);
      if (err instanceof PixiuError && err.code === 'UNAVAILABLE') throw err;
      // Every delivery and history read of that node's messages fails alike while it is
      // away: the first is logged, then one per interval (a fresh operator saw ~180
      // lines in 10 s, one per read).
      const left = this.#readFailures.take();
      if (left !== undefined) {
        this.#opts.logger?.warn({ ...outageFields(err), store: storeId, url: lease.url, node: lease.node, ...thinnedFields(left) }, 'remote record read failed');
      }
      throw unavailable(`the node holding message store ${storeId} cannot be read now; retry later`, err);
    }
  }
}

/**
 * The records of an answer, checked: from the store asked, one per id asked, each
 * null, a record of that id, or the unreadable mark of that id (`{id, unreadable:
 * true}`, records-route.ts). An item of that id that is no record (the owner, of
 * another release, decoded what this one does not read) is unreadable here too: a gap,
 * as a record this node could not decode from its own disk is. An answer of an earlier
 * release (no marks) reads as before.
 * @param undecodable told of each item that is no record (logged: its owner did not)
 * @throws Error when the answer is not that
 */
function recordsOf(
  answer: RecordsAnswer, storeId: string, ids: readonly string[], undecodable: (id: string, err: unknown) => void,
): (ReadRecord | null)[] {
  if (answer?.store !== storeId) throw new Error(`answered for store ${String(answer?.store)}, not ${storeId}`);
  if (!Array.isArray(answer.records) || answer.records.length !== ids.length) throw new Error('answered the wrong number of records');
  return answer.records.map((value, i) => {
    const id = ids[i] as string;
    if (value === null) return null;
    if ((value as { id?: unknown }).id !== id) throw new Error(`answered another record for ${id}`);
    if (isUnreadable(value)) return unreadableRecord(id);
    try {
      return recordOf(value, id);
    } catch (err) {
      undecodable(id, err);
      return unreadableRecord(id);
    }
  });
}
