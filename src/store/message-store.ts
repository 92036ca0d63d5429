/**
 * The message store, "Xiu" (DESIGN.md §3): message content in P classic-level
 * partitions under one data folder (`<dir>/<p>`), with a read cache in front (filled
 * by reads, and by {@link MessageStore.remember} for records about to be read).
 *
 * A put picks its partition by {@link choosePartition}, is checked and encoded before
 * it takes an id, and resolves once its batch is written (fsynced with `sync: true`).
 * Reads route by the partition byte inside the MsgID. Expired records are never
 * returned, swept or not. Each partition's sweeper deletes expired records every
 * `sweepIntervalMs`.
 */
import { unavailable } from '../errors.js';
import { tryDecodeMsgId } from '../ids/msg-id.js';
import type { Logger } from '../logger.js';
import { checkLayout } from './layout.js';
import { checkPartitionRange, openPartitions } from './open-partitions.js';
import type { Partition } from './partition.js';
import { RecordArena } from './record-arena.js';
import { RecordCache } from './record-cache.js';
import type { RecordReader } from './record-reader.js';
import { checkRecord, decodeRecord, expiresAtOf, prepareRecord, type NewMessage, type PutResult, type RecordLimits, type StoredMessage } from './record.js';
import { choosePartition, partitionOfClientMsgId } from './route.js';
import { Sweeper } from './sweeper.js';
import { UnreadableLog, unreadableRecord, type ReadRecord } from './unreadable.js';
import type { MessageStoreOptions } from './store-options.js';
import { WriteFence } from './write-fence.js';
import { writeProblemWords } from './write-problem.js';

export type { NewMessage, PutResult, StoredMessage } from './record.js';
export type { ReadRecord, UnreadableRecord } from './unreadable.js';
export type { MessageStoreOptions } from './store-options.js';

/** The partitioned, durable message store. */
export class MessageStore implements RecordReader {
  readonly #partitions: readonly Partition[];
  readonly #base: number;
  readonly #sweepers: readonly Sweeper[];
  readonly #cache: RecordCache;
  readonly #arena = new RecordArena();
  readonly #limits: RecordLimits;
  readonly #now: () => number;
  readonly #logger: Logger | undefined;
  /** Records that cannot be decoded, logged once each. */
  readonly #unreadable: UnreadableLog;
  #closing: Promise<void> | undefined;
  #writesSuspended: string | undefined;
  /** The store lease's deadline for writes (write-fence.ts); shared with the partitions, which check it per batch. */
  readonly #fence: WriteFence;
  /** Puts wait for it (see {@link holdWritesUntil}); undefined when they go ahead. */
  #hold: Promise<void> | undefined;

  private constructor(partitions: readonly Partition[], cache: RecordCache, fence: WriteFence, opts: MessageStoreOptions) {
    this.#partitions = partitions;
    this.#fence = fence;
    this.#base = opts.partitionBase ?? 0;
    this.#cache = cache;
    this.#limits = { defaultTtlMs: opts.defaultTtlMs, maxMessageBytes: opts.maxMessageBytes, redisClock: opts.redisClock };
    this.#now = opts.now ?? Date.now;
    this.#logger = opts.logger;
    this.#unreadable = new UnreadableLog(opts.logger, opts.onUnreadable);
    this.#sweepers = partitions.map((p) =>
      new Sweeper(() => p.sweep(), opts.sweepIntervalMs, opts.logger?.child({ partition: p.index })));
  }

  /**
   * Opens (creating if missing) every partition folder and starts the sweepers:
   * partition 0 first, whose LevelDB lock stands for the store's (one process opens the
   * store at a time: of two opening it at once, one fails on partition 0 and touches no
   * other), then the others together (open-partitions.ts).
   * @throws StartupError when `partitions` is not a power of two in 1..256, or when a
   *   partition folder is locked by another process or cannot be read; the message
   *   names each such folder (partition 0's alone when it is the one); when the store
   *   was created with another partition count or base (src/store/layout.ts); when the
   *   base leaves no room for P partitions below 256. Partitions already opened are
   *   closed again.
   */
  static async open(opts: MessageStoreOptions): Promise<MessageStore> {
    const count = opts.partitions;
    const base = opts.partitionBase ?? 0;
    checkPartitionRange(count, base);
    await checkLayout(opts.dir, count, base, opts.layout);
    const cache = new RecordCache(opts.cacheBytes);
    const monotonic = opts.monotonic ?? opts.now ?? (() => performance.now());
    const fence = new WriteFence(monotonic);
    const partitions = await openPartitions(opts, fence, monotonic);
    const store = new MessageStore(partitions, cache, fence, opts);
    for (const s of store.#sweepers) s.start();
    opts.logger?.info({ dir: opts.dir, partitions: count, partitionBase: base, durability: opts.sync ? 'fsync' : 'relaxed',
      counters: partitions.map((p) => p.counter) }, 'message store open');
    return store;
  }

  /**
   * Per partition (index 0..P-1, MsgID partition byte B+index): the last counter
   * minted and written to disk (a failed batch write's counters are not counted).
   */
  get counters(): readonly number[] {
    return this.#partitions.map((p) => p.written);
  }

  /**
   * Per partition (as {@link counters}): the last counter assigned, in memory — the next
   * id counts on from it. At or above the written one: the time floor raises it before
   * anything is written ({@link raiseCounters}), and a failed batch write's counters
   * stay assigned.
   */
  get assignedCounters(): readonly number[] {
    return this.#partitions.map((p) => p.counter);
  }

  /**
   * Moves each partition's counter forward to `targets[i]` where it is behind, storing
   * the high-water marks (src/cluster/store-ownership.ts `catchUpMinted`).
   * @throws PixiuError UNAVAILABLE when LevelDB fails
   */
  async advanceCounters(targets: readonly (number | undefined)[]): Promise<void> {
    await Promise.all(this.#partitions.map(async (p, i) => {
      const target = targets[i];
      if (target !== undefined) await p.advanceTo(target);
    }));
  }

  /**
   * Raises every partition's counter to `floor` where it is below, in memory (never
   * lowers one; partition.ts `raiseTo`): the serving node's time floor
   * (src/store/time-floor.ts), applied before it mints. Not applied by default:
   * a store opened by itself counts from its recovered counters.
   * @returns how many partitions were raised
   * @throws RangeError when `floor` is not a counter (an integer 0..2^48-1)
   */
  raiseCounters(floor: number): number {
    return this.#partitions.reduce((n, p) => n + (p.raiseTo(floor) ? 1 : 0), 0);
  }

  /** Partition count P. */
  get partitions(): number {
    return this.#partitions.length;
  }

  /** First MsgID partition byte B of this store: it holds partitions B..B+P-1. */
  get partitionBase(): number {
    return this.#base;
  }

  /** True when MsgID partition byte `partition` is one of this store's (B..B+P-1). */
  hasPartition(partition: number): boolean {
    return partition >= this.#base && partition < this.#base + this.#partitions.length;
  }

  /**
   * Refuses new puts (UNAVAILABLE, with `reason`) while `reason` is set, e.g. while
   * another store holds this store's partition claim (src/cluster/store-ownership.ts):
   * minting ids then could collide with that store's. Reads are not affected.
   * `undefined` takes puts again.
   */
  suspendWrites(reason: string | undefined): void {
    this.#writesSuspended = reason;
  }

  /**
   * Takes puts only until `until`, ms on the store's monotonic clock (option
   * `monotonic`: `performance.now` in a serving node): the store lease is this node's
   * until then (src/cluster/store-ownership.ts sets it at every renewal that confirms
   * it; DESIGN.md §9). Past it a put is refused UNAVAILABLE, and a batch of puts
   * already queued is neither written nor answered as stored (written already, it is
   * answered UNAVAILABLE: src/store/write-fence.ts), until a later call moves it on.
   * A store never given one takes puts without a deadline.
   */
  writeUntil(until: number): void {
    this.#fence.confirm(until);
  }

  /**
   * The last lease renewal failed; its deadline stays ({@link writeUntil}). A put
   * refused past it gives `refusal`, Redis's refusal of the renewal in plain words,
   * when there is one (src/store/write-fence.ts).
   */
  leaseRenewalFailed(refusal: string | undefined): void {
    this.#fence.renewalFailed(refusal);
  }

  /**
   * Makes puts wait until `settled` settles, then go ahead under the suspension then in
   * force ({@link suspendWrites}): for a node starting, whose writes are suspended
   * until it holds its store lease (tens of ms after its port opens), so that a
   * message posted meanwhile is stored once that is known rather than refused.
   */
  holdWritesUntil(settled: Promise<unknown>): void {
    const hold: Promise<void> = settled.then(() => undefined, () => undefined).finally(() => {
      if (this.#hold === hold) this.#hold = undefined;
    });
    this.#hold = hold;
  }

  /**
   * Why the store takes no puts now, or some of them, as `GET /readyz` says it
   * (write-problem.ts; undefined when it takes them all): its writes are suspended
   * ({@link suspendWrites}) or its lease's deadline has passed ({@link writeUntil}):
   * the whole store; or partitions are reopening their database after a failed write
   * (a full disk) or have had a write in flight longer than the write timeout (a
   * stalled disk; partition.ts): those partitions, named.
   */
  get writeProblem(): string | undefined {
    const out = this.#partitions.flatMap((p) => {
      const problem = p.writeProblem;
      return problem === undefined ? [] : [{ index: p.index, reason: problem.message }];
    });
    return writeProblemWords(this.#writesSuspended ?? this.#fence.refusal()?.message, out, this.#partitions.length);
  }

  /**
   * The partitions with a write under way now (a batch write, a sweep step, a reopen),
   * as the stall lines name them (`partition`: the MsgID partition byte), with their
   * folder and how long it has run (ms): what a {@link close} still waits for, apart
   * from LevelDB's own close. Kept while the store closes.
   */
  get writesInFlight(): { readonly partition: number; readonly folder: string; readonly ms: number }[] {
    return this.#partitions.flatMap((p) => {
      const ms = p.writeRunningMs;
      return ms === undefined ? [] : [{ partition: p.index, folder: p.location, ms: Math.round(ms) }];
    });
  }

  /** False once {@link close} has been called. */
  get isOpen(): boolean {
    return this.#closing === undefined;
  }

  /**
   * Stores a message durably, or answers the first message stored under its
   * `clientMsgId` with `duplicate: true` (DESIGN.md §3).
   * @throws PixiuError INVALID_REQUEST for a bad field or non-JSON `data`
   * @throws PixiuError PAYLOAD_TOO_LARGE over `maxMessageBytes`; nothing is stored
   * @throws PixiuError UNAVAILABLE when the store is closed, its writes are
   *   suspended ({@link suspendWrites}), its lease's deadline has passed
   *   ({@link writeUntil}: checked again when its batch is written) or LevelDB fails
   */
  put(msg: NewMessage): Promise<PutResult> {
    // Not async: one promise less per put on the hottest path; errors still reject.
    try {
      this.#assertOpen();
      if (this.#hold !== undefined) return this.#hold.then(() => this.put(msg));
      if (this.#writesSuspended !== undefined) throw unavailable(this.#writesSuspended);
      const fenced = this.#fence.refusal();
      if (fenced !== undefined) throw fenced;
      const prep = prepareRecord(msg, this.#now(), this.#limits, this.#arena);
      const partition = this.#partitions[choosePartition(msg, this.#partitions.length)];
      if (partition === undefined) throw new RangeError('partition out of range');
      return partition.put(prep);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * Checks `msg` as {@link put} would, storing nothing and taking no MsgID.
   * @throws PixiuError INVALID_REQUEST, PAYLOAD_TOO_LARGE as {@link put}
   */
  check(msg: NewMessage): void {
    checkRecord(msg, this.#now(), this.#limits);
  }

  /**
   * The live message stored under `clientMsgId` (in the partition its puts go to,
   * route.ts), without storing anything.
   * @returns the record, or null when none is stored or it has expired
   * @throws PixiuError UNAVAILABLE when the store is closed or LevelDB fails
   */
  async findByClientMsgId(clientMsgId: string): Promise<StoredMessage | null> {
    this.#assertOpen();
    const partition = this.#partitions[partitionOfClientMsgId(clientMsgId, this.#partitions.length)];
    if (partition === undefined) throw new RangeError('partition out of range');
    return (await partition.findByClientMsgId(clientMsgId)) ?? null;
  }

  /**
   * Keeps a stored record in the read cache, for a read expected soon: ingest calls it
   * when a recipient is online, so live delivery reads the record without a disk read.
   * Puts do not cache what they write: a record for offline recipients is read once,
   * maybe days later, and caching every write cost ~10 – 15 % of put throughput
   * (bench:store, `BENCH_STORE_CACHE`).
   *
   * @param put a put's result (new or duplicate)
   */
  remember(put: PutResult): void {
    // Another store's record (a retry answered from it, src/cluster/client-id-claims.ts)
    // is not this cache's: reads of it go to its owner.
    if (!this.holds(put.id)) return;
    this.#cache.setWritten(put.id, put.bytes);
  }

  /** True when MsgID `id` is of one of this store's partitions (B..B+P-1); false for a malformed id. */
  holds(id: string): boolean {
    const parts = tryDecodeMsgId(id);
    return parts !== undefined && this.hasPartition(parts.partition);
  }

  /**
   * One record by MsgID; null when missing, expired, malformed or of a partition
   * this store does not have (other nodes' partitions: src/cluster/store-router.ts);
   * the unreadable mark when its bytes cannot be decoded. See {@link getMany}.
   */
  async get(id: string): Promise<ReadRecord | null> {
    const [record] = await this.getMany([id]);
    return record ?? null;
  }

  /**
   * Records by MsgID, in the order asked, read with one LevelDB `getMany` per
   * partition after the cache. Returned records are deep-frozen (shared with the
   * cache).
   * @returns per id, the record or null (missing, expired, not a MsgID, or naming a
   *   partition outside B..B+P-1): a bad id is never a throw; the
   *   {@link UnreadableRecord} mark where the stored bytes cannot be decoded (bad JSON,
   *   another shape: src/store/unreadable.ts), logged once per id at error and never
   *   cached (read again, a record repaired on disk is itself)
   * @throws PixiuError UNAVAILABLE when the store is closed or LevelDB fails (that may
   *   pass: never the unreadable mark then)
   */
  async getMany(ids: readonly string[]): Promise<(ReadRecord | null)[]> {
    this.#assertOpen();
    const now = this.#now();
    const out: (ReadRecord | null)[] = new Array<ReadRecord | null>(ids.length).fill(null);
    const misses = new Map<Partition, { at: number[]; ids: string[] }>();
    ids.forEach((id, at) => {
      const parts = typeof id === 'string' ? tryDecodeMsgId(id) : undefined;
      const partition = parts === undefined ? undefined : this.#partitions[parts.partition - this.#base];
      if (partition === undefined) return;
      const cached = this.#cache.get(id, now);
      if (cached !== undefined) {
        out[at] = cached;
        return;
      }
      let miss = misses.get(partition);
      if (miss === undefined) misses.set(partition, (miss = { at: [], ids: [] }));
      miss.at.push(at);
      miss.ids.push(id);
    });
    await Promise.all([...misses].map(async ([partition, miss]) => {
      const found = await partition.read(miss.ids);
      found.forEach((bytes, i) => {
        const at = miss.at[i];
        const id = miss.ids[i];
        if (bytes === undefined || at === undefined || id === undefined) return;
        let record: StoredMessage;
        try {
          record = decodeRecord(bytes, id);
        } catch (err) {
          // Expired all the same (its head still says when): null, as any expired record.
          if (!(expiresAtOf(bytes) <= now)) out[at] = this.#unreadableAt(id, partition, err);
          return;
        }
        if (record.expiresAt <= now) return;
        this.#cache.setRead(record, bytes.length);
        out[at] = record;
      });
    }));
    return out;
  }

  /**
   * Sweeps every partition now (as the sweepers do on their timer).
   * @returns how many expired records were deleted
   * @throws PixiuError UNAVAILABLE when the store is closed or LevelDB fails
   */
  async sweepNow(): Promise<number> {
    this.#assertOpen();
    const counts = await Promise.all(this.#partitions.map((p) => p.sweep()));
    return counts.reduce((a, b) => a + b, 0);
  }

  /**
   * Stops the sweepers, lets queued puts finish, closes every partition. Idempotent.
   * A sweep under way stops after its step (about SWEEP_CHUNK_RECORDS records,
   * expiry-sweep.ts): the partitions are closed before the sweepers are waited for, and
   * a sweep ends once its partition is closed. What it did not delete is still in the
   * expiry index, and the next open's first sweep deletes it (a backlog of 300,000
   * records added ~1.2 s to a close when it was swept whole first).
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      const sweepers = Promise.all(this.#sweepers.map((s) => s.stop()));
      await Promise.all(this.#partitions.map((p) => p.close()));
      await sweepers;
      this.#logger?.info('message store closed');
    })();
    return this.#closing;
  }

  /** The mark of record `id` of `partition` that cannot be decoded, logged once (unreadable.ts). */
  #unreadableAt(id: string, partition: Partition, err: unknown): ReadRecord {
    this.#unreadable.report(id, partition.index, partition.location, err);
    return unreadableRecord(id);
  }

  #assertOpen(): void {
    if (this.#closing !== undefined) throw unavailable('message store is closed');
  }
}
