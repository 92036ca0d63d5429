/**
 * How far this node's clock is from Redis's (DESIGN.md §9: Redis's clock is the one
 * clock of the nodes sharing it), measured at each registry renewal (every 5 s, the
 * `TIME` the registry reads anyway: no round trip of its own), exposed as the gauge
 * `pixiu_clock_offset_seconds` and warned about beyond `CLOCK_SKEW_BOUND_MS` (1 s, redis-clock.ts).
 *
 * Why it matters though Pixiu moves what it can onto Redis's clock (inbox retention,
 * claims, markers, room times, registrations): a message's `ts` and `expiresAt` count
 * from the storing node's clock (its expiry from the later of that and Redis's less
 * 1 s), and every node judges expiry, token `exp`/`nbf` and a broadcast's `ttl` by its own. A node
 * ahead shows other nodes' messages `expired` early to its devices and refuses fresh
 * tokens; a node behind takes tokens past their `exp` and delivers broadcasts past
 * their `ttl` (docs/decisions.md "Clock skew: measured, warned about, not refused"). Nothing told an operator before (walk31
 * F3: a node 10 minutes behind logged nothing while its messages were `expired` gaps
 * on the other nodes).
 *
 * Not a refusal: the offset cannot say whose clock is wrong (a Redis whose clock steps
 * would make every node refuse), and what a skewed node writes is kept on Redis's clock
 * where it matters; what skew harms is on the reading side, which a refusal of writes
 * would not cure.
 */
import { LogThrottle, thinnedFields } from '../log-throttle.js';
import type { Logger } from '../logger.js';
import { CLOCK_SKEW_BOUND_MS } from '../redis/redis-clock.js';

/** How often the warning is repeated at most while the clock stays out of step, ms. */
const CLOCK_SKEW_LOG_INTERVAL_MS = 10 * 60_000;

/**
 * How much the offset must have moved since the last warning, ms, besides a change of
 * sign or of size by a factor of 2, for the warning to be logged again at once ({@link offsetMoved}).
 */
const CLOCK_SKEW_MOVE_MS = 60_000;

/**
 * Whether an offset has moved so far from the one last warned about that that warning
 * now misleads, and a new one is logged at once rather than after the 10-minute thinning:
 * it moved by at least {@link CLOCK_SKEW_MOVE_MS} and its sign flipped (behind ↔ ahead,
 * which decides whose clock to fix) or its size changed by more than a factor of 2 (walk40 F6: a Redis
 * whose clock stepped from +1 h to +2 d, or a node's own clock from 1 h behind to 30 min
 * ahead, logged nothing, the last line saying "3600 s behind"). Drift within that does
 * not relog: the gauge carries it.
 * @param warnedMs the offset of the last warning, ms
 * @param offsetMs the offset now, ms (both beyond the bound: out of step)
 */
export function offsetMoved(warnedMs: number, offsetMs: number): boolean {
  // Never for less than CLOCK_SKEW_MOVE_MS: readings jittering across zero (+1.3 s,
  // −1.3 s) would otherwise log at every renewal, the thinning undone (reread2 F2).
  if (Math.abs(offsetMs - warnedMs) < CLOCK_SKEW_MOVE_MS) return false;
  if (Math.sign(warnedMs) !== Math.sign(offsetMs)) return true;
  const [was, now] = [Math.abs(warnedMs), Math.abs(offsetMs)];
  return now > 2 * was || now < was / 2;
}

/** One comparison of this node's clock with Redis's `TIME` (node-registry.ts). */
export interface ClockReading {
  /** This node's clock minus Redis's, ms: positive when this node's runs ahead. */
  readonly offsetMs: number;
  /**
   * How far off the offset may be, ms: half the `TIME` round trip (Redis read its
   * clock somewhere within it; the node's is taken at its middle).
   */
  readonly uncertaintyMs: number;
}

/**
 * A reading from the node's clock before and after a `TIME` round trip, and the
 * monotonic time it took.
 * @param sentAtMs this node's clock when `TIME` was sent, ms since the epoch
 * @param redisMs Redis's answer, ms since the epoch
 * @param answeredAtMs this node's clock when the answer came, ms since the epoch
 * @param roundTripMs the round trip on a monotonic clock, ms
 */
export function clockReading(sentAtMs: number, redisMs: number, answeredAtMs: number, roundTripMs: number): ClockReading {
  return { offsetMs: (sentAtMs + answeredAtMs) / 2 - redisMs, uncertaintyMs: Math.max(0, roundTripMs) / 2 };
}

/**
 * How many readings in a row must show the clock in step before a clock out of step
 * is said to be back: 15 s at the registry's 5 s renewals (review-clock R3: an offset
 * jittering around the bound logged a warning and a "back in step" at each crossing).
 */
const BACK_IN_STEP_READINGS = 3;

/**
 * Watches the readings: sets the gauge, warns while out of step (thinned, but again at
 * once when the offset moves far from the one warned about: {@link offsetMoved}), says when
 * back in step. A reading is out of step when its offset is beyond `CLOCK_SKEW_BOUND_MS`
 * by more than its uncertainty, in step when within half the bound even at its
 * uncertainty, and decides nothing otherwise (hysteresis: an offset hovering near the
 * bound neither warns nor clears the warning; review-clock R3). A slow round trip (its
 * uncertainty over the bound) therefore never clears the warning, and warns only when
 * its offset is beyond the bound even at that uncertainty.
 */
export class ClockSkewWatch {
  readonly #logger: Logger;
  readonly #gauge: (seconds: number) => void;
  /** Redis's URL as it may be shown (no password), for the warning; undefined: not named. */
  readonly #redis: string | undefined;
  /** Thins the warning within one spell out of step; a new spell starts a new one (its first line is logged). */
  #throttle = new LogThrottle(CLOCK_SKEW_LOG_INTERVAL_MS);
  /** True while out of step (warned about) and not yet back ({@link BACK_IN_STEP_READINGS}). */
  #out = false;
  /** In-step readings in a row since the last that was not, while {@link #out}. */
  #inStep = 0;
  /** The offset of the last warning logged in this spell, ms (meaningful while {@link #out}). */
  #warnedMs = 0;

  /**
   * @param logger where the warning goes
   * @param gauge sets `pixiu_clock_offset_seconds` (seconds, this node minus Redis)
   * @param redis Redis's URL as it may be shown (redis/url.ts `redactUrl`), named in the
   *   warning (`redisUrl`): the clock that is off may be its host's (review-clock R5)
   */
  constructor(logger: Logger, gauge: (seconds: number) => void, redis?: string) {
    this.#logger = logger;
    this.#gauge = gauge;
    this.#redis = redis;
  }

  /**
   * Takes one reading (see the class). The gauge is set from every reading but one
   * whose uncertainty is beyond the bound and which does not show the clock out of step:
   * a slow `TIME` answer, its offset known to no better than a second.
   */
  observe(reading: ClockReading): void {
    const size = Math.abs(reading.offsetMs);
    const out = size - reading.uncertaintyMs > CLOCK_SKEW_BOUND_MS;
    const inStep = size + reading.uncertaintyMs <= CLOCK_SKEW_BOUND_MS / 2;
    if (out || reading.uncertaintyMs <= CLOCK_SKEW_BOUND_MS) this.#gauge(reading.offsetMs / 1000);
    const fields = { offsetSeconds: round(reading.offsetMs), uncertaintySeconds: round(reading.uncertaintyMs), boundSeconds: CLOCK_SKEW_BOUND_MS / 1000 };
    if (out) {
      const first = !this.#out;
      if (first) this.#throttle = new LogThrottle(CLOCK_SKEW_LOG_INTERVAL_MS);
      this.#out = true;
      this.#inStep = 0;
      // Monotonic: the thinning must not be moved by the very clock it reports on.
      const moved = !first && offsetMoved(this.#warnedMs, reading.offsetMs);
      const left = moved ? this.#throttle.force(performance.now()) : this.#throttle.take(performance.now());
      if (left === undefined) return;
      const previous = moved ? { previousOffsetSeconds: round(this.#warnedMs) } : {};
      this.#warnedMs = reading.offsetMs;
      const way = reading.offsetMs > 0 ? 'ahead of' : 'behind';
      const redisUrl = this.#redis === undefined ? {} : { redisUrl: this.#redis };
      this.#logger.warn({ ...fields, ...previous, ...redisUrl, ...thinnedFields(left) },
        `this node's clock is ${Math.abs(Math.round(reading.offsetMs / 1000))} s ${way} Redis's: keep every node's clock and Redis's host's in step (NTP); `
        + 'if every node reports about the same offset, it is Redis\'s clock that is off (its host, redisUrl). '
        + 'Messages this node stores count their ts from its clock, and it judges expiry, token exp and broadcast ttl by it (README "Clocks")');
      return;
    }
    if (!this.#out) return;
    this.#inStep = inStep ? this.#inStep + 1 : 0;
    if (this.#inStep < BACK_IN_STEP_READINGS) return;
    this.#out = false;
    this.#inStep = 0;
    this.#logger.info(fields, 'this node\'s clock is back in step with Redis\'s');
  }
}

/** ms as seconds, to the millisecond. */
function round(ms: number): number {
  return Math.round(ms) / 1000;
}
