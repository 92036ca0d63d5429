/**
 * The node's broadcast reader (DESIGN.md §8). It reads the stream page by page from
 * the last entry it handed out, each page with the stream's bounds in one snapshot
 * (`BroadcastStream.rangeWithBounds`), and hands each page to the fan-out, in order,
 * waiting for it before reading on. When it has read everything it waits in a
 * blocking `XREAD` on a Redis connection of its own, so a blocked read never holds up
 * other Redis traffic (the socket.io Redis Streams adapter's shape); the XREAD only
 * wakes it.
 *
 * The bounds tell when the reader fell so far behind that entries were trimmed before
 * it read them (the fan-out waits on its rate limit while a burst of broadcasts passes
 * the stream's cap): the loss is handed to the fan-out, which tells every connection
 * with a `gap` (subscription.ts), instead of skipping them silently (a fresh tester
 * saw 1,528 of 3,000 broadcasts vanish from every connection with no frame, log line
 * or metric). Each loss is logged (and counted by the caller's `onLost`).
 *
 * It recovers by itself: a failed read (Redis restarted, connection lost) is logged
 * and retried with back-off, from the last entry it handed out, so nothing is handed
 * out twice and nothing still retained is skipped.
 *
 * The stream's key holding another type (an operator's `SET`, another program under
 * the prefix) is a failure of the same kind, not a loss: read after read fails and is
 * retried as in an outage, and nothing is handed out (no `gap`, no `reset`), until an
 * operator deletes or repairs the key; but each failed read is logged at error, naming
 * the key, its type and the expected one (src/redis/wrong-type.ts), as no retry cures
 * it (an outage's is a warning). Found so at start, the reader starts from the
 * beginning (`0-0`), as on a missing stream: whatever the key held, a stream made after
 * the repair is newer than the start.
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import type { LostRange } from '../streams/follower.js';
import { compareStreamIds } from '../streams/stream-id.js';
import type { BroadcastEntry, BroadcastStream } from './broadcast-stream.js';
import { outageFields } from '../errors.js';
import { isWrongTypeFailure } from '../redis/wrong-type.js';

/** How long one XREAD blocks, ms; the loop notices `stop()` within this. */
const BLOCK_MS = 5000;
/** Entries per read. */
const READ_COUNT = 200;
/**
 * After the blocking read woke, how long the reader waits before reading the page
 * (collecting what arrived meanwhile), ms. Broadcasts POSTed together reach the stream
 * over a few ms (each is stored and fsynced first); fanned out as one batch, each
 * socket gets them in one write instead of one per read. It costs a live broadcast this much latency, a few per cent of a fan-out to
 * thousands of sockets (bench:broadcast).
 */
const COALESCE_MS = 2;
/** Back-off after a failed read: doubling from the first to the last, ms. */
const BACKOFF_MS = [100, 200, 500, 1000, 2000, 5000] as const;

/** Options of {@link BroadcastReader}. */
export interface BroadcastReaderOptions {
  /** A connection for this reader alone (blocking reads; no command timeout). */
  readonly redis: Redis;
  /** The broadcast stream (its key; pages are read through its own client). */
  readonly stream: BroadcastStream;
  readonly logger: Logger;
  /** Receives each batch, in order; the reader waits for it before reading on. */
  readonly onEntries: (entries: readonly BroadcastEntry[]) => Promise<void>;
  /** Receives each loss (entries trimmed before the reader read them), in its place among the batches. */
  readonly onLost: (range: LostRange) => Promise<void>;
}

/** The reader's line for a failed read: at warn in an outage, at error for a key of the wrong type. */
export const READ_FAILED_LOG = 'broadcast read failed';

/** What a read or a back-off wait ends with when {@link BroadcastReader.stop} interrupts it. */
const STOPPED = Symbol('stopped');

/** A raw XREAD reply: per stream, its entries `[id, [field, value, …]]`. */
type XreadReply = [string, [string, string[]][]][] | null;

/** The read loop. */
export class BroadcastReader {
  readonly #opts: BroadcastReaderOptions;
  #running = false;
  #loop: Promise<void> | undefined;
  /** ID of the last entry handed out (or the stream's end at start). */
  #last = '0-0';
  /** Ends the loop's current wait (a read or a back-off) with {@link STOPPED}; set while it waits. */
  #interrupt: (() => void) | undefined;

  constructor(opts: BroadcastReaderOptions) {
    this.#opts = opts;
  }

  /**
   * Starts reading after the stream's current end (broadcasts are live: a node that
   * starts does not replay history; clients catch up with `last_bseq`). A key of the
   * wrong type does not stop the start: it is logged at error, and the reader starts
   * from `0-0` and retries (see the module comment).
   * @throws PixiuError UNAVAILABLE when Redis cannot be reached
   */
  async start(): Promise<void> {
    // The last ID generated, not the newest entry: everything trimmed before the start
    // is older, so it is never taken for a loss.
    try {
      this.#last = (await this.#opts.stream.bounds()).last ?? '0-0';
    } catch (err) {
      if (!isWrongTypeFailure(err)) throw err;
      this.#last = '0-0';
      this.#logFailure(err, undefined);
    }
    this.#running = true;
    this.#loop = this.#run();
  }

  /** The last bseq handed out, or being handed out (at start: the stream's last ID then). */
  get position(): string {
    return this.#last;
  }

  /**
   * Stops the loop (interrupting a blocked read or a back-off wait) and waits for it.
   * It does not wait on the read itself: a read in flight when the connection dropped
   * is kept by ioredis to be sent again on reconnect, and disconnecting does not
   * reject it, so with Redis down it never settles (the service's shutdown used to
   * hang there for as long as Redis stayed down).
   */
  async stop(): Promise<void> {
    this.#running = false;
    this.#interrupt?.();
    this.#opts.redis.disconnect();
    await this.#loop;
  }

  async #run(): Promise<void> {
    let failures = 0;
    /** The last page was full: read the next at once, without waiting. */
    let more = true;
    while (this.#running) {
      try {
        if (!more) {
          // Wake when an entry follows the last handed out (at once if one does).
          const woke = this.#opts.redis.xread('COUNT', '1', 'BLOCK', String(BLOCK_MS), 'STREAMS', this.#opts.stream.key, this.#last) as Promise<XreadReply>;
          const settled = await this.#unlessStopped(woke);
          if (settled === STOPPED) {
            woke.catch(() => undefined);
            break;
          }
          if ((settled?.[0]?.[1] ?? []).length === 0) continue;
          await this.#sleep(COALESCE_MS);
          if (!this.#running) break;
        }
        const page = await this.#opts.stream.rangeWithBounds(this.#last, READ_COUNT);
        if (failures > 0) this.#opts.logger.info({ after: this.#last }, 'broadcast reader recovered');
        failures = 0;
        more = await this.#handOut(page);
      } catch (caught) {
        if (!this.#running) break;
        const wait = BACKOFF_MS[Math.min(failures, BACKOFF_MS.length - 1)] ?? 5000;
        failures += 1;
        more = false;
        // The blocking XREAD's WRONGTYPE comes raw from the client: named as the page reads' are.
        this.#logFailure(await this.#opts.stream.named(caught), wait);
        await this.#sleep(wait);
      }
    }
  }

  /**
   * Logs a failed read: at error with the key for a key of the wrong type (no retry
   * cures it), else as an outage's warning.
   * @param retryInMs the back-off before the next read; undefined at start
   */
  #logFailure(err: unknown, retryInMs: number | undefined): void {
    const fields = { after: this.#last, ...(retryInMs === undefined ? {} : { retryInMs }) };
    if (isWrongTypeFailure(err)) this.#opts.logger.error({ err: err.cause, reason: err.message, ...fields }, READ_FAILED_LOG);
    else this.#opts.logger.warn({ ...outageFields(err), ...fields }, READ_FAILED_LOG);
  }

  /**
   * Hands a page out: first the loss before it, when the stream was trimmed past the
   * last entry handed out; then its entries.
   * @returns true when the page was full (more may follow at once)
   */
  async #handOut(page: Awaited<ReturnType<BroadcastStream['rangeWithBounds']>>): Promise<boolean> {
    const { entries, malformed, readUpTo, bounds } = page;
    if (readUpTo === undefined) return false;
    const after = this.#last;
    for (const bseq of malformed) this.#opts.logger.warn({ bseq }, 'malformed broadcast entry skipped');
    this.#last = readUpTo;
    const first = entries[0]?.id ?? malformed[0] ?? readUpTo;
    if (compareStreamIds(bounds.maxDeleted, after) > 0) {
      const lost: LostRange = { after, before: first, lastLost: bounds.maxDeleted };
      this.#opts.logger.warn(lost, 'broadcast reader fell behind the stream\'s cap: broadcasts were trimmed before it read them; connections are sent a gap');
      await this.#deliver(() => this.#opts.onLost(lost));
    }
    // A broadcast read after its `ttl` ended is dropped by the fan-out (sent to no one).
    if (entries.length > 0) await this.#deliver(() => this.#opts.onEntries(entries));
    return entries.length + malformed.length >= READ_COUNT;
  }

  async #deliver(fanout: () => Promise<void>): Promise<void> {
    try {
      await fanout();
    } catch (err) {
      this.#opts.logger.error({ err }, 'broadcast fan-out failed');
    }
  }

  /** Waits `ms`, or less when stopped. */
  async #sleep(ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await this.#unlessStopped(new Promise<void>((resolve) => { timer = setTimeout(resolve, ms); }));
    clearTimeout(timer);
  }

  /**
   * `work`'s outcome, or {@link STOPPED} as soon as stop() is called. (One resolver per
   * wait, dropped after it: racing one long-lived promise would keep a reaction per
   * read on it for the life of the node.)
   */
  #unlessStopped<T>(work: Promise<T>): Promise<T | typeof STOPPED> {
    return new Promise<T | typeof STOPPED>((resolve, reject) => {
      this.#interrupt = () => resolve(STOPPED);
      work.then(resolve, reject);
    }).finally(() => {
      this.#interrupt = undefined;
    });
  }
}
