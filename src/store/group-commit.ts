/**
 * Group commit for one partition (DESIGN.md §3): every item added while a write is in
 * flight goes into the next single write, so one fsync covers many puts.
 *
 * One write is in flight at a time. Before each write the loop yields one turn of the
 * event loop (`setImmediate`), so callers woken by the previous write, who add their
 * next item from a promise continuation, make it into the next batch instead of
 * leaving a batch of one behind them.
 *
 * A batch holds at most `maxBatch` items (bounding one write's size and latency);
 * the rest wait for the next one.
 *
 * Exclusive jobs (the sweeper's chunks) run between writes, never beside one, so a
 * job sees no write half done; items that arrive meanwhile wait for the next write,
 * which runs before the next job (a long sweep never starves writes).
 *
 * With {@link WriteSlots} shared by several queues (a store's partitions), a queue
 * takes a slot before each write and each job and gives it back after (a job's writes,
 * a sweep step's deletes, hold a pool thread as a batch's do); while it waits for one,
 * its next batch stays open and keeps taking items (see `write-slots.ts`).
 *
 * A {@link StepWatch} is told when each step of the loop begins and ends (a write with
 * its wait for a slot, or a job): a partition's write-latency watchdog (write-stall.ts),
 * which may then answer every item waiting with an error ({@link GroupCommit.failWaiting}).
 */
import type { WriteSlots } from './write-slots.js';

interface Waiter<R> {
  resolve(result: R): void;
  reject(err: unknown): void;
}

/**
 * What {@link GroupCommit} calls to write one batch: answers one result per item, in
 * the items' order.
 */
export type BatchWriter<T, R> = (items: readonly T[]) => Promise<readonly R[]>;

/** Told of each step of a {@link GroupCommit}'s loop; steps never overlap. */
export interface StepWatch {
  /** A step begins: a batch write (from its wait for a write slot on), or an exclusive job. */
  begin(): void;
  /** The step that began last has ended, however it ended. */
  end(): void;
}

/** Options of a {@link GroupCommit}. */
export interface GroupCommitOptions<R> {
  /**
   * Called after each successful write with the batch's results (one per item, in
   * order) and its duration in ms (metrics).
   */
  readonly onBatch?: ((results: readonly R[], ms: number) => void) | undefined;
  /** Shared with other queues: at most that many of their writes at once. */
  readonly slots?: WriteSlots | undefined;
  /** Told when each step begins and ends. */
  readonly watch?: StepWatch | undefined;
}

/** Queue of items written in batches, one batch in flight at a time. */
export class GroupCommit<T, R> {
  readonly #write: BatchWriter<T, R>;
  readonly #onBatch: ((results: readonly R[], ms: number) => void) | undefined;
  readonly #maxBatch: number;
  readonly #slots: WriteSlots | undefined;
  readonly #watch: StepWatch | undefined;
  #items: T[] = [];
  #waiters: Waiter<R>[] = [];
  /** The waiters of the batch being written; empty between writes. */
  #writing: Waiter<R>[] = [];
  #jobs: (() => Promise<void>)[] = [];
  #running = false;
  #idle: (() => void)[] = [];

  /**
   * @param write writes one batch; its rejection rejects every item of that batch
   * @param maxBatch most items in one batch
   */
  constructor(write: BatchWriter<T, R>, maxBatch: number, options: GroupCommitOptions<R> = {}) {
    this.#write = write;
    this.#maxBatch = maxBatch;
    this.#onBatch = options.onBatch;
    this.#slots = options.slots;
    this.#watch = options.watch;
  }

  /** Adds an item to the next batch; resolves with its result once that batch is written. */
  add(item: T): Promise<R> {
    this.#items.push(item);
    const done = new Promise<R>((resolve, reject) => this.#waiters.push({ resolve, reject }));
    this.#start();
    return done;
  }

  /** Runs `job` between two writes, with no write in flight; answers its result. */
  exclusive<J>(job: () => Promise<J>): Promise<J> {
    return new Promise<J>((resolve, reject) => {
      this.#jobs.push(() => Promise.resolve().then(job).then(resolve, reject));
      this.#start();
    });
  }

  /**
   * Rejects with `err` every item not answered yet: those of the batch being written (its
   * write goes on; what it answers is dropped) and those queued for the next batch, which
   * are taken out of the queue and never written. Exclusive jobs are left queued.
   * @returns the items taken out of the queue, in the order they were added
   */
  failWaiting(err: unknown): T[] {
    const dropped = this.#items;
    const waiters = [...this.#writing, ...this.#waiters];
    this.#items = [];
    this.#waiters = [];
    this.#writing = [];
    for (const w of waiters) w.reject(err);
    return dropped;
  }

  /** Resolves once nothing is queued or in flight. */
  idle(): Promise<void> {
    if (!this.#running) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #start(): void {
    if (this.#running) return;
    this.#running = true;
    void this.#run();
  }

  async #run(): Promise<void> {
    while (this.#items.length > 0 || this.#jobs.length > 0) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (this.#items.length > 0) {
        this.#watch?.begin();
        try {
          // The batch stays open while this waits: items added meanwhile join it.
          const slot = this.#slots?.acquire();
          if (slot !== undefined) await slot;
          try {
            // None left when they were failed meanwhile (failWaiting).
            if (this.#items.length > 0) await this.#flush();
          } finally {
            this.#slots?.release();
          }
        } finally {
          this.#watch?.end();
        }
      }
      const job = this.#jobs.shift();
      if (job !== undefined) {
        this.#watch?.begin();
        try {
          const slot = this.#slots?.acquire();
          if (slot !== undefined) await slot;
          try {
            await job();
          } finally {
            this.#slots?.release();
          }
        } finally {
          this.#watch?.end();
        }
      }
    }
    this.#running = false;
    for (const resolve of this.#idle.splice(0)) resolve();
  }

  async #flush(): Promise<void> {
    let items = this.#items;
    let waiters = this.#waiters;
    if (items.length > this.#maxBatch) {
      items = this.#items.splice(0, this.#maxBatch);
      waiters = this.#waiters.splice(0, this.#maxBatch);
    } else {
      this.#items = [];
      this.#waiters = [];
    }
    const started = performance.now();
    this.#writing = waiters;
    let results: readonly R[];
    try {
      results = await this.#write(items);
      if (results.length !== items.length) throw new Error(`batch writer answered ${results.length} results for ${items.length} items`);
    } catch (err) {
      for (const w of waiters) w.reject(err);
      return;
    } finally {
      this.#writing = [];
    }
    const ms = performance.now() - started;
    // Lengths were checked above, so every index holds a result.
    waiters.forEach((w, i) => w.resolve(results[i] as R));
    try {
      this.#onBatch?.(results, ms);
    } catch (err) {
      // A faulty metrics hook must not stop the write loop; surface it, loudly.
      queueMicrotask(() => {
        throw err;
      });
    }
  }
}
