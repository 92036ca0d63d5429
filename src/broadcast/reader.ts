/**
 * The node's broadcast reader (DESIGN.md §8): one blocking `XREAD` loop on a Redis
 * connection of its own, so a blocked read never holds up other Redis traffic (the
 * socket.io Redis Streams adapter's shape). It hands each batch of new entries to the
 * fan-out, in order, and waits for it before reading on.
 *
 * It recovers by itself: a failed read (Redis restarted, connection lost) is logged
 * and retried with back-off, from the last entry it handed out, so nothing is handed
 * out twice and nothing still retained is skipped.
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { isExpired, parseBroadcastEntry, type BroadcastEntry } from './broadcast-stream.js';
import { outageFields } from '../errors.js';

/** How long one XREAD blocks, ms; the loop notices `stop()` within this. */
const BLOCK_MS = 5000;
/** Entries per read. */
const READ_COUNT = 200;
/**
 * After a read that woke on fewer than READ_COUNT entries, how long the reader waits
 * before collecting what arrived meanwhile (one non-blocking read), ms. Broadcasts
 * POSTed together reach the stream over a few ms (each is stored and fsynced first);
 * fanned out as one batch, each socket gets them in one write instead of one per
 * read. It costs a live broadcast this much latency, a few per cent of a fan-out to
 * thousands of sockets (bench:broadcast).
 */
const COALESCE_MS = 2;
/** Back-off after a failed read: doubling from the first to the last, ms. */
const BACKOFF_MS = [100, 200, 500, 1000, 2000, 5000] as const;

/** Options of {@link BroadcastReader}. */
export interface BroadcastReaderOptions {
  /** A connection for this reader alone (blocking reads; no command timeout). */
  readonly redis: Redis;
  /** The broadcast stream key. */
  readonly key: string;
  readonly logger: Logger;
  /** Receives each batch, in order; the reader waits for it before reading on. */
  readonly onEntries: (entries: readonly BroadcastEntry[]) => Promise<void>;
}

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
   * starts does not replay history; clients catch up with `last_bseq`).
   * @throws PixiuError UNAVAILABLE when Redis cannot be reached
   */
  async start(): Promise<void> {
    const newest = await this.#opts.redis.xrevrange(this.#opts.key, '+', '-', 'COUNT', '1');
    this.#last = newest[0]?.[0] ?? '0-0';
    this.#running = true;
    this.#loop = this.#run();
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
    while (this.#running) {
      let reply: XreadReply;
      try {
        const read = this.#opts.redis.xread('COUNT', String(READ_COUNT), 'BLOCK', String(BLOCK_MS), 'STREAMS', this.#opts.key, this.#last) as Promise<XreadReply>;
        const settled = await this.#unlessStopped(read);
        if (settled === STOPPED) {
          read.catch(() => undefined);
          break;
        }
        reply = settled;
        if (failures > 0) this.#opts.logger.info({ after: this.#last }, 'broadcast reader recovered');
        failures = 0;
      } catch (err) {
        if (!this.#running) break;
        const wait = BACKOFF_MS[Math.min(failures, BACKOFF_MS.length - 1)] ?? 5000;
        failures += 1;
        this.#opts.logger.warn({ ...outageFields(err), after: this.#last, retryInMs: wait }, 'broadcast read failed');
        let timer: NodeJS.Timeout | undefined;
        await this.#unlessStopped(new Promise<void>((resolve) => { timer = setTimeout(resolve, wait); }));
        clearTimeout(timer);
        continue;
      }
      let raw = reply?.[0]?.[1] ?? [];
      if (raw.length === 0) continue;
      if (raw.length < READ_COUNT) {
        let timer: NodeJS.Timeout | undefined;
        await this.#unlessStopped(new Promise<void>((resolve) => { timer = setTimeout(resolve, COALESCE_MS); }));
        clearTimeout(timer);
        if (!this.#running) break;
        raw = raw.concat(await this.#readMore(raw[raw.length - 1]?.[0] ?? this.#last, READ_COUNT - raw.length));
      }
      const entries: BroadcastEntry[] = [];
      const now = Date.now();
      for (const r of raw) {
        const e = parseBroadcastEntry(r);
        // Read after its `ttl` ended (this node read late): sent to no one.
        if (e) {
          if (!isExpired(e, now)) entries.push(e);
        } else this.#opts.logger.warn({ bseq: r[0] }, 'malformed broadcast entry skipped');
      }
      this.#last = raw[raw.length - 1]?.[0] ?? this.#last;
      try {
        await this.#opts.onEntries(entries);
      } catch (err) {
        this.#opts.logger.error({ err }, 'broadcast fan-out failed');
      }
    }
  }

  /**
   * Entries after `afterId` that are already in the stream (a read that does not
   * block), at most `count`. A failure answers none: the next blocking read, from the
   * last entry handed out, gets them.
   */
  async #readMore(afterId: string, count: number): Promise<[string, string[]][]> {
    try {
      const more = await this.#opts.redis.xread('COUNT', String(count), 'STREAMS', this.#opts.key, afterId) as XreadReply;
      return more?.[0]?.[1] ?? [];
    } catch {
      return [];
    }
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
