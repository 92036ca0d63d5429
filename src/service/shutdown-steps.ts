/**
 * The steps of a service's shutdown, run in order (DESIGN.md §6; the order is set in
 * service.ts). A Redis that does not answer must not hold the exit for longer than a
 * supervisor's grace period, after which the process would be killed before its store
 * closed: the steps that wait on Redis share one budget of time, and a step that runs
 * out of it is given up (a fresh-user finding: with Redis hung, 14 – 45 s to exit).
 */
import type { Logger } from '../logger.js';

/** One step of the shutdown. */
export interface CloseStep {
  /** Its name in the log. */
  readonly what: string;
  readonly run: () => Promise<unknown>;
  /**
   * Set for a step that waits on Redis: it may take at most `boundMs` and what is left
   * of the shared budget; then, or when none is left before it starts, `giveUp` is
   * called (e.g. drop the connection instead of QUIT) and the shutdown goes on.
   */
  readonly redis?: { readonly boundMs: number; readonly giveUp?: () => void };
}

/**
 * Less of the shared budget than this left, ms, and a Redis step is not run: no Redis
 * round trip fits (the shortest command timeout allowed is 10 ms), and a timer that
 * fired a moment early left the next step a millisecond or less — given up "after
 * 1 ms" (an earlier session's finding, low; a test of the budget failed on it once).
 */
export const MIN_STEP_MS = 10;

/** What a step raced with its time runs out to. */
const OUT_OF_TIME = Symbol('out of time');

/**
 * Runs `steps` in order, each even when an earlier one failed or was given up. A step
 * that fails is logged at error with its error (`shutdown step failed`: not expected);
 * a Redis step given up is a warning naming the step and the time it had, no stack (a
 * hung Redis is a condition the shutdown handles, an ops newcomer's finding):
 * `shutdown step given up` with `timeoutMs`, or `shutdown step not run` when less than
 * {@link MIN_STEP_MS} was left for it.
 * @param redisBudgetMs time all the Redis steps may take together, ms, counted from the
 *   start of the first of them
 */
export async function closeAll(logger: Logger, steps: readonly CloseStep[], redisBudgetMs: number): Promise<void> {
  let budgetEnds: number | undefined;
  for (const { what, run, redis } of steps) {
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    logger.debug({ what }, 'shutdown step');
    try {
      if (redis === undefined) {
        await run();
      } else {
        budgetEnds ??= started + redisBudgetMs;
        const leftMs = budgetEnds - started;
        const allowedMs = Math.min(redis.boundMs, leftMs);
        if (leftMs < MIN_STEP_MS) {
          redis.giveUp?.();
          logger.warn({ what }, 'shutdown step not run: the shutdown\'s time for Redis is spent (Redis does not answer?); going on without it');
          continue;
        }
        const outcome = await Promise.race([run(), new Promise((resolve) => {
          timer = setTimeout(() => resolve(OUT_OF_TIME), allowedMs);
        })]);
        if (outcome === OUT_OF_TIME) {
          redis.giveUp?.();
          logger.warn({ what, timeoutMs: Math.round(allowedMs) }, 'shutdown step given up: not done in its time (Redis does not answer?); going on without it');
        }
      }
    } catch (err) {
      redis?.giveUp?.();
      logger.error({ err, what }, 'shutdown step failed');
    } finally {
      clearTimeout(timer);
      logger.debug({ what, ms: Math.round(performance.now() - started) }, 'shutdown step ended');
    }
  }
}
