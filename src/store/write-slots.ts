/**
 * How many partitions of one store may have a batch write, or a job between writes (a
 * sweep step, a reopen: group-commit.ts), in flight at once: one fewer than the libuv
 * pool has threads ({@link writeSlotCount}).
 *
 * Every batch write (LevelDB's log write and, with `sync: true`, its fsync) holds a
 * thread of the libuv pool for as long as it takes, and the pool has
 * `UV_THREADPOOL_SIZE` threads (4 unless set; libuv docs, "Thread pool work
 * scheduling"). With more partitions than threads, writes handed to the pool beyond its
 * size only wait in its queue with their batch already closed, so a put arriving
 * meanwhile misses them and waits for one more write after them. Held back here
 * instead, a waiting partition's batch stays open and takes in every put that arrives
 * until a thread is free: the same wait, one write less for the late puts, and fewer,
 * larger writes (fewer fsyncs) when the pool is the bottleneck.
 *
 * Fewer slots than threads (1 or 2) made larger batches still (10.3 and 6.1 puts per
 * write against 3.3 under single POSTs) but no faster ingest, single or batch, in
 * alternating runs of bench:ingest (bench/README.md, 2026-12-01 AMD session).
 *
 * One thread is left to reads. Reads (a record by id, history pages, delivery's
 * `getMany`) run on the same pool, and a write to a stalled disk (frozen, failing) holds
 * its thread until the disk comes back: with a slot per thread, four stalled writes took
 * every thread and every read of every partition waited behind them, records in the
 * page cache included (a reviewer's finding). With one slot fewer, writes and the jobs
 * between them never take the last thread. Raising `UV_THREADPOOL_SIZE` from `pixiu
 * serve` instead was not chosen: libuv reads it once, when the pool first starts, so it
 * would have to be set before any module's first pool use, and with a slot per thread
 * stalled writes would still take them all. Slots 1, 2 or 4 with the pool at 4 gave
 * ingest rates in no order (bench/README.md, "Tried and dropped"). A pool of one
 * thread has none to spare: its one slot is shared.
 */

/** The size of the libuv thread pool of this process: `UV_THREADPOOL_SIZE`, default 4. */
export function threadPoolSize(env: NodeJS.ProcessEnv = process.env): number {
  const n = Number(env.UV_THREADPOOL_SIZE);
  // libuv clamps the setting to 1..1024 and takes 4 when it is unset or not a number.
  return Number.isInteger(n) && n > 0 ? Math.min(n, 1024) : 4;
}

/**
 * The write slots of a store in this process: one fewer than the pool's threads, at
 * least one (see the module comment).
 */
export function writeSlotCount(env: NodeJS.ProcessEnv = process.env): number {
  return Math.max(1, threadPoolSize(env) - 1);
}

/** A counting semaphore of write slots, granted in request order. */
export class WriteSlots {
  #free: number;
  readonly #waiting: (() => void)[] = [];

  /** @param size slots, at least 1 */
  constructor(size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`write slots must be a positive integer, got ${size}`);
    this.#free = size;
  }

  /**
   * Takes a slot: at once (returns undefined) when one is free, else resolves once one
   * is handed over. Every slot taken must be given back with {@link release}.
   */
  acquire(): Promise<void> | undefined {
    if (this.#free > 0) {
      this.#free--;
      return undefined;
    }
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  /** Gives a slot back: to the longest waiter, else to the free count. */
  release(): void {
    const next = this.#waiting.shift();
    if (next !== undefined) next();
    else this.#free++;
  }
}
