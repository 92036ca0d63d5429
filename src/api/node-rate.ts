/**
 * One token bucket for a whole node (limiter's TokenBucket, as the broadcast fan-out
 * uses), for what anyone may ask without a token and whose cost falls on the node:
 * `GET /metrics` scrapes, and the Redis writes of `GET /readyz` (docs/decisions.md,
 * "Operations routes under load"). Not per client: a flood from many addresses is
 * held to the same rate as one from a single address.
 */
import { TokenBucket } from 'limiter';
import type { RateLimit } from '../gateway/user-rate.js';

/** A node-wide token bucket that starts full: a node just started takes its whole burst. */
export class NodeRate {
  readonly #bucket: TokenBucket;

  /** @param limit the bucket's size (`burst`) and its refill (`perMinute`) */
  constructor(limit: RateLimit) {
    this.#bucket = new TokenBucket({ bucketSize: limit.burst, tokensPerInterval: limit.perMinute, interval: 'minute' });
    // limiter's bucket starts empty; a node just started has had no requests yet.
    this.#bucket.content = limit.burst;
  }

  /**
   * Takes one token. A refused request takes none.
   * @returns 0 when taken; else the seconds until a token is back (at least 1, whole:
   *   a `Retry-After`)
   */
  take(): number {
    if (this.#bucket.tryRemoveTokens(1)) return 0;
    return Math.max(1, Math.ceil(this.#bucket.getWaitTime(1) / 1000));
  }
}
