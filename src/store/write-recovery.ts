/**
 * A partition's recovery from a failed write (src/store/partition.ts). A write that
 * failed part way (a full disk, an I/O error) may have left LevelDB's log torn, and
 * LevelDB goes on appending after the tear: every record written after it, fsynced and
 * acknowledged, was dropped the next time the database opened (a fresh operator's try
 * lost 238 acknowledged messages after one disk-full episode and a restart). So after
 * a failed write the partition takes no write until its database has been closed and
 * opened again: recovery keeps every whole record before the tear and starts a new
 * log. A reopen is tried every {@link REOPEN_RETRY_MS}, between writes, once the disk
 * has room for it (src/store/reopen-room.ts); reads go on meanwhile.
 */
import { PixiuError, outageFields, unavailable } from '../errors.js';
import { LogThrottle, OUTAGE_LOG_INTERVAL_MS, thinnedFields } from '../log-throttle.js';
import type { Logger } from '../logger.js';
import type { PartitionDb } from './partition-db.js';
import { lackOfRoomToReopen } from './reopen-room.js';

/** Wait between two tries to reopen a partition whose write failed, ms. */
export const REOPEN_RETRY_MS = 1000;

/** What {@link WriteRecovery} needs of its partition. */
export interface RecoveringPartition {
  /** Partition number, for messages. */
  readonly index: number;
  /** The partition's folder (where free space is read). */
  readonly location: string;
  /** The partition's database, closed and opened again by a reopen. */
  readonly db: PartitionDb;
  /** Runs `job` with no batch write or sweep step in flight (GroupCommit `exclusive`). */
  readonly exclusive: <J>(job: () => Promise<J>) => Promise<J>;
  /** True once the partition is closed: no reopen is tried any more. */
  readonly closed: () => boolean;
  readonly logger?: Logger | undefined;
  /** Told of every failed write, also those while a reopen is pending (metrics). */
  readonly onWriteFailure?: (() => void) | undefined;
}

/**
 * Why a write failed, in the words that end LevelDB's error, without the file's path:
 * `IO error: /data/xiu/6/000003.log: No space left on device` gives `No space left on
 * device` (the OS's words for ENOSPC). Given in the refusals and `/readyz` (a black-box
 * tester's walk16 F3.1: the producer whose write failed heard no cause); the whole error
 * is in the log line.
 * @returns undefined when the error's last words are empty, name a path or run long
 */
export function writeFailureWords(err: unknown): string | undefined {
  const message = err instanceof Error ? err.message : undefined;
  const last = message?.split(': ').pop()?.trim();
  // A path: absolute, or one word with a separator (`Input/output error` is words).
  const path = last !== undefined && (/^(?:\/|[A-Za-z]:\\)/.test(last) || /^\S*[/\\]\S*$/.test(last));
  return last === undefined || last === '' || path || last.length > 120 ? undefined : last;
}

/** The failed-write state of one partition and its reopen tries. */
export class WriteRecovery {
  readonly #p: RecoveringPartition;
  /** Set by a failed write until the database is reopened: what writes are refused with. */
  #failure: PixiuError | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** Failed reopen tries, logged at most once per {@link OUTAGE_LOG_INTERVAL_MS}. */
  readonly #log = new LogThrottle(OUTAGE_LOG_INTERVAL_MS);

  constructor(partition: RecoveringPartition) {
    this.#p = partition;
  }

  /** Why the partition takes no writes now; undefined when it takes them. */
  get failure(): PixiuError | undefined {
    return this.#failure;
  }

  /**
   * A new UNAVAILABLE error for a write refused now (callers may add to what they get),
   * or undefined when writes are taken.
   */
  refusal(): PixiuError | undefined {
    const failure = this.#failure;
    return failure === undefined ? undefined : unavailable(failure.message, failure.cause);
  }

  /**
   * Takes the partition out of writes after `err` failed one, and starts the tries to
   * reopen it (once, however many writes failed). Also while the partition closes: the
   * puts it still drains (queued before the close) must not go after the tear, or they
   * are acknowledged and lost at the next open; only the reopen is not tried then
   * (the next open recovers the log).
   * @returns the refusal the writes get until the partition has reopened ({@link refusal}),
   *   for the failed write's caller too
   */
  failed(err: unknown): PixiuError {
    this.#p.onWriteFailure?.();
    if (this.#failure === undefined) {
      const why = writeFailureWords(err);
      this.#failure = unavailable(`message store partition ${this.#p.index} is reopening its database after a failed write${why === undefined ? '' : ` (${why})`}`, err);
      this.#p.logger?.error({ err }, 'store partition write failed: it takes no writes until it has reopened its database (the write may have torn its log)');
      this.#schedule();
    }
    // Set just above if it was not already.
    return this.refusal() as PixiuError;
  }

  /** Stops the reopen tries (the partition is closing). */
  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #schedule(): void {
    if (this.#p.closed() || this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#p.exclusive(() => this.#reopen()).then((done) => {
        if (!done) this.#schedule();
      });
    }, REOPEN_RETRY_MS);
    this.#timer.unref();
  }

  /**
   * Closes and opens the database; true once it is open again and takes writes. Waits,
   * with the database left open for reads, while the disk has no room for the reopen.
   */
  async #reopen(): Promise<boolean> {
    if (this.#p.closed() || this.#failure === undefined) return true;
    const { db } = this.#p;
    try {
      if (db.status === 'open') {
        const room = await lackOfRoomToReopen(this.#p.location);
        if (room !== undefined) {
          this.#logFailure(new Error(`${room.free} bytes free on its disk, ${room.needed} wanted`));
          return false;
        }
        await db.close();
      }
      await db.open();
    } catch (err) {
      this.#logFailure(err);
      return false;
    }
    this.#failure = undefined;
    this.#p.logger?.warn('store partition reopened its database after a failed write: it takes writes again');
    return true;
  }

  /** A condition that is waited out (no room yet, a read-only disk): its reason, no stack (docs/api.md "Errors"). */
  #logFailure(err: unknown): void {
    const left = this.#log.take();
    if (left !== undefined) {
      this.#p.logger?.warn({ ...outageFields(err), ...thinnedFields(left) }, `store partition cannot reopen its database yet; tries again every ${REOPEN_RETRY_MS / 1000} s`);
    }
  }
}
