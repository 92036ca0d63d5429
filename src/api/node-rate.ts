/**
 * One token bucket for a whole node, for what anyone may ask without a token and whose
 * cost falls on the node: `GET /metrics` scrapes, and the Redis writes of `GET /readyz`
 * (docs/decisions.md, "Operations routes under load"). Not per client: a flood from many
 * addresses is held to the same rate as one from a single address. The bucket is the
 * per-user one of src/gateway/user-rate.ts, with a single key: it starts full, a refused
 * request takes no token, and its `Retry-After` is in whole seconds.
 */
import { UserRates, type RateLimit } from '../gateway/user-rate.js';

/** The one key of the node's bucket. */
const NODE = 'node';

/** A node-wide token bucket that starts full: a node just started takes its whole burst. */
export class NodeRate {
  readonly #rates: UserRates;

  /**
   * @param limit the bucket's size (`burst`) and its refill (`perMinute`)
   * @param now the clock its refill follows, ms (default `performance.now`; a test's own)
   */
  constructor(limit: RateLimit, now?: () => number) {
    this.#rates = new UserRates(limit, now === undefined ? {} : { now });
  }

  /**
   * Takes one token. A refused request takes none.
   * @returns 0 when taken; else the seconds until a token is back (at least 1, whole:
   *   a `Retry-After`)
   */
  take(): number {
    return this.#rates.take(NODE);
  }
}
