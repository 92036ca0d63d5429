/**
 * Per-user request rates on one node: a token bucket per user, for the WebSocket
 * handshakes of `GET /v1/connect` (`PIXIU_CONNECT_BURST`, `PIXIU_CONNECT_RATE`) and the
 * requests of the `/v1/me` routes ({@link ME_REQUEST_LIMIT}). A request over its
 * user's rate is refused 429 RATE_LIMITED with `Retry-After` before it reads Redis or
 * sends anything (docs/protocol.md "Connecting", docs/api.md "Client routes";
 * docs/decisions.md, Gateway).
 *
 * A bucket and an LRU map of its own, not limiter's TokenBucket in an lru-cache, for a
 * measured reason: built on those two (a5fecac, reverted), bench:e2e case (c) — 10,000
 * idle connections of distinct users — went from 8.9 – 9.3 to 16.2 – 16.6 KiB of RSS
 * per connection against issue 4's 12 KiB (lru-cache preallocates its slot arrays for
 * `max`, 100,000 here, and with `ttlAutopurge` arms a timer per entry; without `max`
 * still 11.3 KiB). limiter could give the `Retry-After` (`getWaitTime`); its
 * RateLimiter adds a fixed window that refuses tokens the bucket has refilled. A bucket
 * here is two numbers, refilled when read.
 */
import { PixiuError } from '../errors.js';

/** A token bucket's size and refill. */
export interface RateLimit {
  /** Requests that may come at once (the bucket's size), at least 1. */
  readonly burst: number;
  /** Requests per minute it refills at (sustained), more than 0. */
  readonly perMinute: number;
}

/**
 * The `/v1/me` routes' limit per user on one node: a burst of 200 requests, 20 per
 * second sustained (1,200 a minute). Reading a whole inbox at the default cap (10,000
 * messages) in pages of the default `limit` (100), each page acked, is 200 requests:
 * the burst holds it at any speed, and a client polling every second uses 2 a second.
 * One token's `autocannon` flood ran ~400–530 requests a second (a hostile-client
 * tester's finding): held to 20, the node's other work keeps its pace.
 */
export const ME_REQUEST_LIMIT: RateLimit = Object.freeze({ burst: 200, perMinute: 1200 });

/**
 * Users tracked at most by one {@link UserRates}; past it the least recently seen is
 * forgotten (it gets a full bucket back). Only verified tokens reach a bucket, and a
 * bucket is dropped once idle long enough to be full again, so this is only a bound
 * for a node with that many users active within a refill time.
 */
export const MAX_TRACKED_USERS = 100_000;

/** One user's bucket: tokens left at `atMs`. */
interface Bucket {
  tokens: number;
  atMs: number;
}

/**
 * Token buckets keyed by user id. Memory is bounded: buckets are kept in the order
 * they were last used, and each use drops those at the front that have been idle long
 * enough to be full (a full bucket and none are the same), so the map holds only users
 * seen within the last `burst / rate`; and never more than {@link MAX_TRACKED_USERS}.
 */
export class UserRates {
  readonly #burst: number;
  /** Tokens per ms. */
  readonly #perMs: number;
  /** How long an empty bucket takes to be full, ms: an entry idle this long is dropped. */
  readonly #fillMs: number;
  readonly #maxUsers: number;
  readonly #now: () => number;
  /** By user, least recently used first (a Map keeps insertion order; a use re-inserts). */
  readonly #buckets = new Map<string, Bucket>();

  /**
   * @param limit the bucket's size and refill
   * @param options.now the clock, ms (default `performance.now`; a test's own)
   * @param options.maxUsers buckets kept at most ({@link MAX_TRACKED_USERS})
   */
  constructor(limit: RateLimit, options: { now?: () => number; maxUsers?: number } = {}) {
    this.#burst = limit.burst;
    this.#perMs = limit.perMinute / 60_000;
    this.#fillMs = this.#burst / this.#perMs;
    this.#maxUsers = options.maxUsers ?? MAX_TRACKED_USERS;
    this.#now = options.now ?? (() => performance.now());
  }

  /** Users with a bucket now (a metric, and the tests' check of the bound). */
  get size(): number {
    return this.#buckets.size;
  }

  /**
   * Takes one token from `user`'s bucket. A refused request takes none: a client
   * retrying too fast is let through at the sustained rate.
   * @returns 0 when taken; else the seconds until a token is back (at least 1, whole:
   *   a `Retry-After`)
   */
  take(user: string): number {
    const now = this.#now();
    this.#dropIdle(now);
    const bucket = this.#buckets.get(user);
    const tokens = bucket === undefined ? this.#burst : Math.min(this.#burst, bucket.tokens + (now - bucket.atMs) * this.#perMs);
    this.#buckets.delete(user);
    const taken = tokens >= 1;
    this.#buckets.set(user, { tokens: taken ? tokens - 1 : tokens, atMs: now });
    if (this.#buckets.size > this.#maxUsers) {
      const oldest = this.#buckets.keys().next();
      if (oldest.done !== true) this.#buckets.delete(oldest.value);
    }
    return taken ? 0 : Math.max(1, Math.ceil((1 - tokens) / this.#perMs / 1000));
  }

  /** Drops the buckets at the front (least recently used) that are full again by now. */
  #dropIdle(now: number): void {
    for (const [user, bucket] of this.#buckets) {
      if (now - bucket.atMs < this.#fillMs) return;
      this.#buckets.delete(user);
    }
  }
}

/**
 * A limit in words, as the refusal and the OpenAPI document state it: `a burst of 200,
 * then 20 a second` (`… a minute` when the rate is not a whole number a second).
 */
export function rateWords(limit: RateLimit): string {
  const perSecond = limit.perMinute / 60;
  return `a burst of ${limit.burst}, then ${Number.isInteger(perSecond) ? `${perSecond} a second` : `${limit.perMinute} a minute`}`;
}

/**
 * The refusal of a request over its user's rate: 429 RATE_LIMITED with `Retry-After`.
 * @param what what was refused, for the message ("handshakes", "requests to /v1/me")
 * @param limit the limit it is over, named in the message
 * @param retryAfterSeconds from {@link UserRates.take}
 * @param setting where the limit is set, when it is a setting (`PIXIU_CONNECT_BURST, PIXIU_CONNECT_RATE`)
 */
export function overRate(what: string, limit: RateLimit, retryAfterSeconds: number, setting?: string): PixiuError {
  return new PixiuError('RATE_LIMITED', `too many ${what} for this user on this node (${rateWords(limit)}${setting === undefined ? '' : `: ${setting}`}); retry after ${retryAfterSeconds} s`,
    { retryAfterSeconds });
}
