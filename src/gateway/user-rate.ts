/**
 * Per-user request rates on one node: a token bucket per user, for the WebSocket
 * handshakes of `GET /v1/connect` (`PIXIU_CONNECT_BURST`, `PIXIU_CONNECT_RATE`) and the
 * requests of the `/v1/me` routes ({@link ME_REQUEST_LIMIT}). A request over its
 * user's rate is refused 429 RATE_LIMITED with `Retry-After` before it reads Redis or
 * sends anything (docs/protocol.md "Connecting", docs/api.md "Client routes";
 * docs/decisions.md, Gateway).
 *
 * Built on two libraries, as the project takes one over code of its own for what
 * Pixiu is not about (rate limits, LRU caches): each user's bucket is a `limiter`
 * `TokenBucket` (the package whose `RateLimiter` paces the broadcast fan-out,
 * src/broadcast/fanout.ts), whose `tryRemoveTokens` takes a token without waiting and
 * whose `getWaitTime` gives the `Retry-After`; the buckets by user are an
 * `lru-cache` `LRUCache` (as the record cache, src/store/record-cache.ts), which bounds
 * them and drops those idle long enough to be full again. Not limiter's `RateLimiter`:
 * over its bucket it counts a fixed window (a burst's worth per interval), which
 * refuses what the bucket has refilled (as src/gateway/frame-limits.ts records).
 */
import { TokenBucket } from 'limiter';
import { LRUCache } from 'lru-cache';
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

/**
 * Token buckets keyed by user id, on the clock `performance.now()` (limiter's and
 * lru-cache's). Memory is bounded: the buckets are an LRU cache of at most
 * {@link MAX_TRACKED_USERS}, and a bucket unused for as long as an empty one takes to
 * fill (`burst / rate`, the cache's ttl, rounded up to a whole ms) is dropped (a full
 * bucket and none are the same), so the cache holds only users seen within that time.
 */
export class UserRates {
  readonly #limit: RateLimit;
  /** By user; a `get` makes it the most recently used and restarts its ttl. */
  readonly #buckets: LRUCache<string, TokenBucket>;

  /**
   * @param limit the bucket's size and refill
   * @param options.maxUsers buckets kept at most ({@link MAX_TRACKED_USERS})
   */
  constructor(limit: RateLimit, options: { maxUsers?: number } = {}) {
    this.#limit = limit;
    this.#buckets = new LRUCache<string, TokenBucket>({
      max: options.maxUsers ?? MAX_TRACKED_USERS,
      // An empty bucket is full again after this, ms: dropping it then changes nothing.
      // Whole ms, rounded up (lru-cache's ttl is an integer): never dropped before full.
      ttl: Math.ceil(limit.burst / (limit.perMinute / 60_000)),
      updateAgeOnGet: true,
      // Dropped by a timer once idle past the ttl, not only when next looked up.
      ttlAutopurge: true,
      // Read the clock at each check: lru-cache otherwise reuses a reading for 1 ms,
      // by a timer, which a test's mocked performance.now() outruns.
      ttlResolution: 0,
    });
  }

  /**
   * Users with a bucket now (a metric, and the tests' check of the bound). Drops the
   * buckets idle past the ttl first (a scan of all of them): their autopurge timers run
   * on real time, and may be a ms behind.
   */
  get size(): number {
    this.#buckets.purgeStale();
    return this.#buckets.size;
  }

  /**
   * Takes one token from `user`'s bucket; a user without one (new, or dropped) starts
   * with a full bucket. A refused request takes none: a client retrying too fast is let
   * through at the sustained rate.
   * @returns 0 when taken; else the seconds until a token is back (at least 1, whole:
   *   a `Retry-After`)
   */
  take(user: string): number {
    let bucket = this.#buckets.get(user);
    if (bucket === undefined) {
      bucket = new TokenBucket({ bucketSize: this.#limit.burst, tokensPerInterval: this.#limit.perMinute, interval: 'minute' });
      // A TokenBucket starts empty; RateLimiter fills its own the same way.
      bucket.content = this.#limit.burst;
      this.#buckets.set(user, bucket);
    }
    if (bucket.tryRemoveTokens(1)) return 0;
    return Math.max(1, Math.ceil(bucket.getWaitTime(1) / 1000));
  }
}

/**
 * The refusal of a request over its user's rate: 429 RATE_LIMITED with `Retry-After`.
 * @param what what was refused, for the message ("handshakes", "requests to /v1/me")
 * @param limit the limit it is over, named in the message
 * @param retryAfterSeconds from {@link UserRates.take}
 * @param setting where the limit is set, when it is a setting (`PIXIU_CONNECT_BURST, PIXIU_CONNECT_RATE`)
 */
export function overRate(what: string, limit: RateLimit, retryAfterSeconds: number, setting?: string): PixiuError {
  const perSecond = limit.perMinute / 60;
  const rate = Number.isInteger(perSecond) ? `${perSecond} a second` : `${limit.perMinute} a minute`;
  return new PixiuError('RATE_LIMITED', `too many ${what} for this user on this node (a burst of ${limit.burst}, then ${rate}${setting === undefined ? '' : `: ${setting}`}); retry after ${retryAfterSeconds} s`,
    { retryAfterSeconds });
}
