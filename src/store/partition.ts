/**
 * One store partition: one classic-level (LevelDB) database in its own folder
 * (`<dir>/<p>`, DESIGN.md §3), with its counter, its group commit, its idempotency
 * index and its expiry sweep. The key layout is documented in `keys.ts`.
 *
 * Guarantees:
 * - A put resolves after the batch holding it is written, and with `sync: true` only
 *   after LevelDB fsynced it (DESIGN.md §3, §11).
 * - MsgIDs are never reused: the counter is recovered on open from the larger of the
 *   high-water key and the last record key of each kind.
 * - Within a partition, counters are assigned when a batch is built, in the order the
 *   puts were issued, and puts resolve in counter order (one batch is written at a
 *   time). A put refused before it is queued (too large, invalid) takes no counter; a
 *   duplicate takes none either.
 * - One `clientMsgId` is stored once: a duplicate of a put queued or being written
 *   waits for it (in-flight-puts.ts); the batch writer looks up the others in the `c`
 *   index when the batch is built, with no write in flight (client-id-index.ts).
 * - After a write fails (a full disk, an I/O error), the partition takes no write until
 *   it has closed and reopened its database (src/store/write-recovery.ts: the failed
 *   write may have torn LevelDB's log); puts answer UNAVAILABLE meanwhile, reads go on.
 * - A write in flight longer than the write timeout (a stalled disk: write-stall.ts)
 *   takes the partition out of writes until it ends: the puts waiting for it, in its
 *   batch or queued behind it, are answered UNAVAILABLE at once (none was acknowledged;
 *   the queued ones are never written), new puts are refused UNAVAILABLE, reads go on.
 *   The stalled batch may still be written when the disk comes back: its `c` entries
 *   then make a retry with the same `clientMsgId` answer it, as for any batch written
 *   but not acknowledged (the store lease's fence, write-fence.ts).
 */
import { PixiuError, unavailable } from '../errors.js';
import { MAX_COUNTER, msgIdPrefix } from '../ids/msg-id.js';
import type { Logger } from '../logger.js';
import { sweepDue } from './expiry-sweep.js';
import { SweepClock } from './sweep-clock.js';
import { GroupCommit } from './group-commit.js';
import { HIGH_WATER_KEY, messageKey } from './keys.js';
import { BatchEntries } from './batch-entries.js';
import { openPartitionDb, type PartitionDb } from './partition-db.js';
import { duplicatesIn, storedUnder } from './client-id-index.js';
import { flooredCounter } from './time-floor.js';
import { InFlightPuts } from './in-flight-puts.js';
import type { PreparedRecord, PutResult, StoredMessage } from './record.js';
import { WriteRecovery } from './write-recovery.js';
import type { WriteFence } from './write-fence.js';
import type { WriteSlots } from './write-slots.js';
import { DEFAULT_WRITE_TIMEOUT_MS, WriteStall } from './write-stall.js';

/** Most puts in one batch write: bounds a write's size and an expiry entry's length. */
export const MAX_BATCH_PUTS = 2000;

/** Options of {@link Partition.open}. */
export interface PartitionOptions {
  /** true: a put resolves after fsync (durability `fsync`); false: `relaxed`. */
  readonly sync: boolean;
  /** Clock, ms since the epoch (injectable so tests need not sleep). */
  readonly now: () => number;
  /** A clock that never steps, ms: bounds the sweeps' cutoff (sweep-clock.ts). */
  readonly monotonic: () => number;
  /** Redis's clock, undefined until known: bounds the sweeps' cutoff too (store-options.ts, sweep-clock.ts). */
  readonly redisClock?: (() => number | undefined) | undefined;
  /** Called after each batch that wrote records: how many (not its duplicates) and its ms (store-options.ts). */
  readonly onBatch?: (written: number, ms: number) => void;
  /**
   * Called once per failed write (a batch of puts, a sweep step's deletes, a counter
   * advance), before the partition takes itself out of writes (write-recovery.ts).
   */
  readonly onWriteFailure?: () => void;
  /** Shared by the store's partitions: how many of them may write at once (write-slots.ts). */
  readonly slots?: WriteSlots;
  /** Shared by the store's partitions: the store lease's deadline for writes (write-fence.ts); none: no deadline. */
  readonly fence?: WriteFence;
  /**
   * How long one write (with its wait for a write slot) or job between writes may take
   * before the partition is stalled (write-stall.ts), ms; default
   * {@link DEFAULT_WRITE_TIMEOUT_MS}.
   */
  readonly writeTimeoutMs?: number | undefined;
  /** Where a failed write and the reopen after it are logged. */
  readonly logger?: Logger;
}

/** One partition of the message store. */
export class Partition {
  /** Partition number, 0..255: the first byte of its MsgIDs. */
  readonly index: number;
  /** The partition's folder. */
  readonly location: string;
  readonly #db: PartitionDb;
  readonly #sync: boolean;
  /** Now for a `client_msg_id`'s live check: the store's clock, at most 1 s past Redis's (SweepClock.liveNow). */
  readonly #liveNow: () => number;
  readonly #sweepClock: SweepClock;
  readonly #commit: GroupCommit<PreparedRecord, PutResult>;
  /** Puts with a `clientMsgId` queued or being written. */
  readonly #inFlight = new InFlightPuts();
  /** The MsgID's first 4 hex digits per kind (partition and kind bytes). */
  readonly #idPrefix: readonly string[];
  #counter: number;
  /** The highest counter a completed batch write carried: minted and on disk. */
  #written: number;
  #sweeping: Promise<unknown> = Promise.resolve();
  #closed = false;
  /** Refuses writes after a failed one until the database has reopened. */
  readonly #recovery: WriteRecovery;
  readonly #fence: WriteFence | undefined;
  /** Refuses writes while a write (or a job between writes) has run past the write timeout. */
  readonly #stall: WriteStall;

  /** This partition's log lines (`partition` set); undefined in tests that give none. */
  readonly #logger: Logger | undefined;

  private constructor(db: PartitionDb, location: string, index: number, counter: number, options: PartitionOptions) {
    this.#db = db;
    this.location = location;
    this.index = index;
    this.#counter = counter;
    this.#written = counter;
    this.#sync = options.sync;
    this.#fence = options.fence;
    this.#sweepClock = new SweepClock(options.now, options.monotonic, options.redisClock);
    this.#liveNow = () => this.#sweepClock.liveNow();
    this.#logger = options.logger?.child({ partition: index });
    this.#stall = new WriteStall({
      index, limitMs: options.writeTimeoutMs ?? DEFAULT_WRITE_TIMEOUT_MS, logger: this.#logger,
      // The puts waiting are answered now; the queued ones are never written (a retry stores them).
      onStall: (refusal) => this.#inFlight.forget(this.#commit.failWaiting(refusal)),
    });
    // Counted: the records written; a duplicate put writes nothing (a batch of only those, nothing at all).
    const { onBatch } = options;
    this.#commit = new GroupCommit((items) => this.#writeBatch(items), MAX_BATCH_PUTS, {
      onBatch: onBatch && ((results, ms) => {
        const written = results.reduce((n, r) => (r.duplicate ? n : n + 1), 0);
        if (written > 0) onBatch(written, ms);
      }),
      slots: options.slots, watch: this.#stall,
    });
    this.#recovery = new WriteRecovery({
      index, location, db, logger: this.#logger, onWriteFailure: options.onWriteFailure,
      exclusive: (job) => this.#commit.exclusive(job),
      closed: () => this.#closed,
    });
    this.#idPrefix = [0, 1, 2, 3, 4].map((kind) => msgIdPrefix(index, kind));
  }

  /**
   * Opens (creating if missing) the partition in `location` and recovers its counter.
   * @throws StartupError naming the folder: locked by another process, or cannot be
   *   read (not a folder, corrupt LevelDB files)
   */
  static async open(location: string, index: number, options: PartitionOptions): Promise<Partition> {
    const { db, counter } = await openPartitionDb(location, index);
    return new Partition(db, location, index, counter, options);
  }

  /** The last counter assigned (0 when none ever was). */
  get counter(): number {
    return this.#counter;
  }

  /**
   * The last counter written to disk: assigned in a batch write that completed. A
   * failed write (disk full) assigned counters it never stored; they are not counted.
   */
  get written(): number {
    return this.#written;
  }

  /**
   * Why the partition takes no writes now, as the UNAVAILABLE puts are refused with: a
   * write failed and the database has not reopened yet, or a write has been in flight
   * longer than the write timeout; undefined when it takes them.
   */
  get writeProblem(): PixiuError | undefined {
    return this.#recovery.failure ?? this.#stall.refusal();
  }

  /**
   * How long the write loop's step running now (a batch write, a sweep step, a reopen)
   * has run, ms; undefined when none runs. Kept while the partition closes: what its
   * close still waits for.
   */
  get writeRunningMs(): number | undefined {
    return this.#stall.runningMs();
  }

  /**
   * Moves the counter forward to `counter` (nothing when it is there already) and
   * stores the high-water mark, so the ids up to it are never minted here (DESIGN.md
   * §2: a MsgID is minted once). For a store behind what it minted before
   * (src/cluster/store-ownership.ts `catchUpMinted`).
   * @throws PixiuError UNAVAILABLE when LevelDB fails
   */
  async advanceTo(counter: number): Promise<void> {
    // A mark above 2^48 - 1 would make the next open refuse the partition (partition-db.ts).
    if (!Number.isSafeInteger(counter) || counter > MAX_COUNTER) throw new RangeError(`counter ${counter} is not a counter (at most 2^48 - 1)`);
    await this.#commit.exclusive(async () => {
      if (counter <= this.#counter) return;
      const refusal = this.#recovery.refusal();
      if (refusal !== undefined) throw refusal;
      try {
        await this.#db.batch().put(HIGH_WATER_KEY, Buffer.from(String(counter), 'latin1')).write({ sync: true });
      } catch (err) {
        throw this.#writeFailed(err);
      }
      this.#counter = counter;
      this.#written = Math.max(this.#written, counter);
    });
  }

  /**
   * Raises the counter to `floor` in memory where it is below (never lowers it): the
   * next id minted is above it. Nothing is written now: the batch that mints that id
   * carries the high-water mark, and a partition that mints nothing has no id to protect
   * (src/store/time-floor.ts, the serving node's time floor).
   * @returns true when the counter was raised
   * @throws RangeError when `floor` is not a counter (an integer 0..MAX_COUNTER)
   */
  raiseTo(floor: number): boolean {
    if (!Number.isSafeInteger(floor) || floor < 0 || floor > MAX_COUNTER) throw new RangeError(`counter floor ${floor} is not a counter (0 to 2^48 - 1)`);
    const next = flooredCounter(this.#counter, floor);
    if (next === this.#counter) return false;
    this.#counter = next;
    return true;
  }

  /**
   * Stores a prepared record, or answers the first record stored under its
   * `clientMsgId` (an expired one does not count: the message is stored anew).
   * @throws PixiuError UNAVAILABLE when the partition is closed, takes no writes after
   *   a failed one or while one is stalled ({@link writeProblem}), or LevelDB fails; when
   *   a write stalls while the put waits (partition.ts, module comment)
   */
  put(prep: PreparedRecord): Promise<PutResult> {
    if (this.#closed) return Promise.reject(closedError());
    const refusal = this.#recovery.refusal() ?? this.#stall.refusal();
    if (refusal !== undefined) return Promise.reject(refusal);
    const cid = prep.message.clientMsgId;
    if (cid === undefined) return this.#commit.add(prep);
    const duplicate = this.#inFlight.duplicate(cid);
    if (duplicate !== undefined) return duplicate;
    const put = this.#commit.add(prep);
    // Forgotten by the batch writer once the batch is written or failed.
    this.#inFlight.add(cid, prep, put);
    return put;
  }

  /**
   * The live record stored under `clientMsgId`, if any: a put of it in flight is
   * waited for; else the `c` index is read. Reads only: a caller that must not store
   * a message unless it is a retry (a room message to a room now empty) asks first.
   * @returns the record, or undefined when none is stored or it has expired
   * @throws PixiuError UNAVAILABLE when the partition is closed or LevelDB fails
   */
  async findByClientMsgId(clientMsgId: string): Promise<StoredMessage | undefined> {
    if (this.#closed) throw closedError();
    const inFlight = this.#inFlight.find(clientMsgId);
    if (inFlight !== undefined) return inFlight;
    try {
      return (await storedUnder(this.#db, this.#liveNow, this.#logger, [clientMsgId]))[0]?.message;
    } catch (err) {
      throw this.#unavailable(err);
    }
  }

  /**
   * Writes one batch: answers the duplicates from the `c` index, gives the others
   * their MsgIDs in queue order, and writes them with their index and expiry entries and
   * the counter's high-water mark, in one LevelDB batch (batch-entries.ts). Past the
   * store lease's deadline (write-fence.ts) it fails whole: before its ids are taken, or,
   * when the deadline passed while it was written (a pause, a slow fsync), written but
   * none answered as stored.
   */
  async #writeBatch(preps: readonly PreparedRecord[]): Promise<PutResult[]> {
    try {
      // Puts queued before a write failed: none goes after the possible tear.
      const refusal = this.#recovery.refusal() ?? this.#fence?.refusal();
      if (refusal !== undefined) throw refusal;
      const out = await duplicatesIn(this.#db, this.#liveNow, this.#logger, preps);
      // Once every slot is filled (here, or by the loop below) `out` has no undefined.
      if (!out.includes(undefined)) return out as PutResult[];
      const entries = new BatchEntries(this.#db.batch());
      for (let i = 0; i < preps.length; i++) {
        const prep = preps[i] as PreparedRecord;
        if (out[i] !== undefined) continue;
        const { message } = prep;
        const id = this.#nextId(message.kind);
        message.id = id;
        out[i] = { id, duplicate: false, message, bytes: prep.bytes };
        entries.add(id, message, prep.bytes);
      }
      const mark = this.#counter;
      const batch = entries.seal(mark);
      try {
        await batch.write({ sync: this.#sync });
      } catch (err) {
        throw this.#writeFailed(err);
      }
      this.#written = Math.max(this.#written, mark);
      // Another node may serve the store now: nothing acknowledged that it does not hold.
      const late = this.#fence?.refusal();
      if (late !== undefined) throw late;
      return out as PutResult[];
    } catch (err) {
      throw this.#unavailable(err);
    } finally {
      this.#inFlight.forget(preps);
    }
  }

  #nextId(kind: number): string {
    // 2^48 ids per partition: at a million puts a second, nine years.
    if (this.#counter >= MAX_COUNTER) throw unavailable(`message store partition ${this.index} has used every message id`);
    const counter = ++this.#counter;
    return `${this.#idPrefix[kind] ?? ''}${counter.toString(16).padStart(12, '0')}`;
  }

  /**
   * Reads stored records by MsgID (ids already known to be valid and of this
   * partition). Expiry is the caller's to check.
   * @returns the record bytes (UTF-8 JSON) per id, in order; undefined where none
   * @throws PixiuError UNAVAILABLE when the partition is closed or LevelDB fails
   */
  read(ids: readonly string[]): Promise<(Buffer | undefined)[]> {
    if (this.#closed) return Promise.reject(closedError());
    return this.#guard(this.#db.getMany(ids.map((id) => messageKey(id))));
  }

  /**
   * Deletes every record expired at the time of the call (by the sweep clock, which
   * keeps a forward step of the wall clock from deleting early), with its expiry and
   * idempotency entries, in steps of about SWEEP_CHUNK_RECORDS (expiry-sweep.ts) records that
   * each take one turn between batch writes, so puts keep flowing during a long
   * sweep. Sweeps of one partition run one after another. A partition that takes no
   * writes after a failed one ({@link writeProblem}) sweeps nothing until it does.
   * @returns the number of records deleted
   * @throws PixiuError UNAVAILABLE when LevelDB fails
   */
  sweep(): Promise<number> {
    const run = this.#sweeping.then(() => this.#sweepAll());
    this.#sweeping = run.catch(() => undefined);
    return run;
  }

  #sweepAll(): Promise<number> {
    return sweepDue(this.#db, this.#sweepClock.cutoff(), () => this.#closed, (step) => this.#commit.exclusive(async () => {
      // Reopening after a failed write: the sweep waits for the next round (the
      // failure is logged once, not once per round as a failed sweep would be).
      if (this.#recovery.failure !== undefined) return { deleted: 0, done: true };
      try {
        return await step();
      } catch (err) {
        // Its deletes are writes: treated as one that failed, whatever failed.
        throw this.#writeFailed(err);
      }
    }));
  }

  /**
   * Stops taking puts, waits for queued puts and a running sweep, and closes the
   * database. Idempotent.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#recovery.stop();
    this.#stall.stop();
    await Promise.allSettled([...this.#inFlight.all(), this.#sweeping]);
    await this.#commit.idle();
    await this.#db.close();
  }

  async #guard<T>(op: Promise<T>): Promise<T> {
    try {
      return await op;
    } catch (err) {
      throw this.#unavailable(err);
    }
  }

  /**
   * Takes the partition out of writes after a failed one (write-recovery.ts); answers the
   * failure as the write's caller gets it: in the words of the writes refused after it
   * and of `/readyz`, with the cause.
   */
  #writeFailed(err: unknown): PixiuError {
    const refusal = this.#recovery.failed(err);
    return err instanceof PixiuError ? err : refusal;
  }

  #unavailable(err: unknown): PixiuError {
    if (err instanceof PixiuError) return err;
    return unavailable(`message store partition ${this.index} is unavailable`, err);
  }
}

function closedError(): PixiuError {
  return unavailable('message store is closed');
}
