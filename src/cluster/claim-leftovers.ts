/**
 * What a `client_msg_id` claim (src/cluster/client-id-claims.ts) leaves in Redis when
 * Redis does not answer it, and the tries to clear it once Redis answers again.
 *
 * A claim (`SET … NX GET`) or a settle that gets no reply (a timeout with Redis hung,
 * the connection lost) may still run: Redis runs a command it had not read yet when
 * it thaws. A claim that ran so leaves this store's pending mark for its 30 s
 * (`PENDING_MS`, counted from when Redis ran it), though the request was answered 503
 * and stored nothing, and a retry on another node sharing the Redis was refused as
 * "being stored by another node" all that time (a retry on this node finds its own
 * mark and goes on). So the node remembers such an id here and, with no attempt of
 * its own for it under way, clears it: a pending mark of this store while this node is
 * storing nothing under it is stale, since only this node writes its store's mark.
 *
 * The first try goes out at once, on the same connection as the command that failed,
 * so a Redis that was only hung runs it right after that command when it thaws; more
 * tries follow at 1, 3, 7 and 15 s while none was answered (the connection was lost, or
 * Redis stayed hung past their own timeouts), none past `PENDING_MS` after the failure:
 * the mark has lapsed by then on its own.
 */
import type { Logger } from '../logger.js';

/** Most ids remembered at once. Past it an id is not remembered, and its mark lapses on its own after `PENDING_MS`. */
export const MAX_LEFTOVERS = 10_000;
/** The waits between tries, ms: the first try is at once. */
const RETRY_WAITS_MS = [1000, 2000, 4000, 8000, 16_000] as const;

/** How leftovers are cleared: given by their owner (ClientIdClaims). */
export interface LeftoverClearing<T> {
  /** True while an attempt of this node for `clientMsgId` is under way: it holds the claim now, so no try is made then. */
  busy(clientMsgId: string): boolean;
  /**
   * Clears one leftover; resolves once Redis answered (cleared, or there was nothing of
   * this node's left to clear), rejects when it did not (tried again later). Must write
   * its command at once, or check {@link busy} again right before it does.
   */
  clear(clientMsgId: string, leftover: T): Promise<void>;
}

/** One remembered id. */
interface Entry<T> {
  readonly leftover: T;
  /** When its tries stop (the mark has lapsed by then), ms since the epoch. */
  readonly until: number;
  /** When the next try is due, ms since the epoch. */
  nextAt: number;
  /** Tries made (or skipped while busy) so far. */
  tries: number;
  /** A try is in flight. */
  clearing: boolean;
}

/**
 * The ids whose claim or settle got no reply, each with what to clear, up to
 * {@link MAX_LEFTOVERS}.
 * @typeParam T what clearing one needs
 */
export class ClaimLeftovers<T> {
  readonly #clearing: LeftoverClearing<T>;
  readonly #pendingMs: number;
  readonly #logger: Logger | undefined;
  readonly #entries = new Map<string, Entry<T>>();
  #timer: NodeJS.Timeout | undefined;
  /** When the timer fires, ms since the epoch. */
  #timerAt = Infinity;
  /** The cap was met and not logged since it was last below it. */
  #full = false;
  #stopped = false;
  /** Tries skipped because an attempt for their id was under way, since the start. */
  #skipped = 0;

  /**
   * @param pendingMs how long a pending mark lives (PENDING_MS): no try is made later
   *   than that after the failure
   */
  constructor(clearing: LeftoverClearing<T>, pendingMs: number, logger?: Logger) {
    this.#clearing = clearing;
    this.#pendingMs = pendingMs;
    this.#logger = logger;
  }

  /** Ids remembered now (tests). */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * Tries skipped so far because an attempt of this node for their id was under way
   * ({@link LeftoverClearing.busy}); only grows. Tests wait on it to know a sweep ran
   * and left a mark alone.
   */
  get skipped(): number {
    return this.#skipped;
  }

  /**
   * Remembers `clientMsgId`, replacing what was remembered for it (a later attempt's
   * failure), and tries to clear it at once (once this tick's callers are done: the
   * attempt that failed ends first). Past {@link MAX_LEFTOVERS}, nothing is remembered.
   */
  add(clientMsgId: string, leftover: T): void {
    if (this.#stopped) return;
    if (!this.#entries.has(clientMsgId) && this.#entries.size >= MAX_LEFTOVERS) {
      if (!this.#full) {
        this.#logger?.warn({ max: MAX_LEFTOVERS }, 'too many client_msg_id claims left by Redis failures to clear; more lapse on their own within 30 s');
      }
      this.#full = true;
      return;
    }
    const now = Date.now();
    this.#entries.set(clientMsgId, { leftover, until: now + this.#pendingMs, nextAt: now, tries: 0, clearing: false });
    this.#schedule(now);
  }

  /** Forgets every id and makes no more tries (the service closes). */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#entries.clear();
  }

  /** Sets the timer for `at` unless it fires before. */
  #schedule(at: number): void {
    if (this.#stopped || at >= this.#timerAt) return;
    clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(this.#sweep, Math.max(0, at - Date.now()));
    this.#timer.unref();
  }

  /** Makes the tries due, and sets the timer for the next one. */
  readonly #sweep = (): void => {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    const now = Date.now();
    let next = Infinity;
    for (const [id, entry] of this.#entries) {
      if (entry.clearing) continue;
      if (entry.nextAt <= now) this.#try(id, entry, now);
      if (this.#entries.get(id) === entry && !entry.clearing) next = Math.min(next, entry.nextAt);
    }
    if (this.#entries.size < MAX_LEFTOVERS) this.#full = false;
    if (next !== Infinity) this.#schedule(next);
  };

  /** One try of `entry` (skipped while an attempt for `id` is under way), or its end. */
  #try(id: string, entry: Entry<T>, now: number): void {
    const wait = RETRY_WAITS_MS[entry.tries];
    entry.tries += 1;
    // Once its tries are over (or the next would come past the mark's life) it goes.
    const last = wait === undefined || now + wait > entry.until;
    entry.nextAt = last ? Infinity : now + wait;
    if (this.#clearing.busy(id)) {
      this.#skipped += 1;
      if (last) this.#entries.delete(id);
      return;
    }
    entry.clearing = true;
    this.#clearing.clear(id, entry.leftover).then(() => {
      if (this.#entries.get(id) === entry) this.#entries.delete(id);
    }, (err: unknown) => {
      entry.clearing = false;
      if (this.#entries.get(id) !== entry) return;
      if (last) {
        this.#entries.delete(id);
        this.#logger?.debug({ err: (err as Error).message, clientMsgId: id }, 'a client_msg_id claim left by a Redis failure was not cleared; it lapses on its own');
      } else {
        this.#schedule(entry.nextAt);
      }
    });
  }
}
