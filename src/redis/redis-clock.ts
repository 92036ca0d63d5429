/**
 * Expiries Redis applies on its own clock (DESIGN.md §9: Redis's clock is the one
 * clock of the nodes sharing it). A key set to expire at a moment by the node's clock
 * (`SET … PXAT`, `PEXPIREAT`) is expired by Redis's: with the node's clock behind
 * Redis's by D, the key lapsed D early, and not at all set past its time left. Such
 * an expiry is given as the same moment on Redis's clock, through the offset the node
 * registry measures to Redis's `TIME` at each renewal (NodeRegistry.now).
 */

/**
 * How far a node's clock may be from Redis's before it is out of step, ms: warned
 * about (src/cluster/clock-skew.ts, `pixiu_clock_offset_seconds`), and how far ahead of
 * Redis's clock an expiry sweep may cut (src/store/sweep-clock.ts). NTP keeps machines
 * within milliseconds: a second off is a clock that is wrong, not one that drifts.
 */
export const CLOCK_SKEW_BOUND_MS = 1000;

/**
 * Now by Redis's clock, ms since the Unix epoch: in a serving node the node registry's
 * (`NodeRegistry.now`, `Gateway.redisNow`: this machine's clock plus the offset measured
 * at its last renewal); `Date.now` for a Redis on this machine.
 */
export type RedisNow = () => number;

/**
 * `at`, a moment on this machine's clock (`Date.now`), as the same moment on Redis's
 * clock, and never before 1 ms past Redis's now (a key given an expiry already past
 * would be deleted at once, to no avail).
 * @param at ms since the Unix epoch, on this machine's clock (a stored record's expiry)
 * @param redisNow now by Redis's clock ({@link RedisNow})
 * @returns ms since the Unix epoch on Redis's clock, an integer: the `PXAT` to give
 */
export function onRedisClock(at: number, redisNow: RedisNow): number {
  const now = redisNow();
  return Math.ceil(Math.max(at - Date.now() + now, now + 1));
}
