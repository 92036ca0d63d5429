/**
 * The steps of a service's shutdown, run in order (DESIGN.md §6; the order is set in
 * service.ts). A Redis that does not answer must not hold the exit for longer than a
 * supervisor's grace period, after which the process would be killed before its store
 * closed: the steps that wait on Redis share one budget of time, and a step that runs
 * out of it is given up (a fresh-user finding: with Redis hung, 14 – 45 s to exit).
 * A step held by a disk (the store's close, on a stalled disk: store-close.ts) has a
 * bound of its own; one that runs out of it is given up too, or that fails, and the
 * shutdown answers that it did not finish, which `pixiu serve` turns into a non-zero
 * exit.
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
  /**
   * Set for a step that may be held by something other than Redis for good (the store's
   * close on a stalled disk): it may take at most `ms`, not counted in the Redis budget;
   * then `giveUp` is called with `ms` (it logs why: {@link closeAll} logs nothing more),
   * the step counts as unfinished and the shutdown goes on without it. Such a step that
   * fails (rejects) counts as unfinished too, its failure logged as any step's.
   */
  readonly bound?: { readonly ms: number; readonly giveUp: (ms: number) => void };
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
 * {@link MIN_STEP_MS} was left for it. A step with a `bound` of its own that runs out of
 * it is left running, its `giveUp` says why, and it is named in the answer; one that
 * fails is named there too (for the store, both are a close that did not end cleanly:
 * review3 F6), while the failure of a step without a `bound` (HTTP, Redis) leaves
 * nothing of this node's undone and is not.
 * @param redisBudgetMs time all the Redis steps may take together, ms, counted from the
 *   start of the first of them, less the time of the other steps after it
 * @returns the steps with a `bound` of their own given up past it or failed (`what`), in
 *   order: empty when every such step ended well (a Redis step given up or failed is not
 *   counted: the shutdown handles a hung Redis, nothing of this node's is left undone by
 *   it)
 */
export async function closeAll(logger: Logger, steps: readonly CloseStep[], redisBudgetMs: number): Promise<string[]> {
  let budgetEnds: number | undefined;
  const unfinished: string[] = [];
  /** The timer of the step running now, cleared when it ends. */
  let timer: NodeJS.Timeout | undefined;
  /** `run()`'s outcome, or {@link OUT_OF_TIME} when it has not ended within `ms`. */
  const race = (run: () => Promise<unknown>, ms: number): Promise<unknown> => Promise.race([run(), new Promise((resolve) => {
    timer = setTimeout(() => resolve(OUT_OF_TIME), ms);
  })]);
  for (const { what, run, redis, bound } of steps) {
    const started = performance.now();
    timer = undefined;
    logger.debug({ what }, 'shutdown step');
    try {
      if (bound !== undefined) {
        if (await race(run, bound.ms) === OUT_OF_TIME) {
          unfinished.push(what);
          bound.giveUp(bound.ms);
        }
      } else if (redis === undefined) {
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
        if (await race(run, allowedMs) === OUT_OF_TIME) {
          redis.giveUp?.();
          logger.warn({ what, timeoutMs: Math.round(allowedMs) }, 'shutdown step given up: not done in its time (Redis does not answer?); going on without it');
        }
      }
    } catch (err) {
      redis?.giveUp?.();
      // The store's close failing (LevelDB's close answering an I/O error; a partition's
      // failure ends the wait for the others' closes too) leaves it not closed cleanly,
      // as one given up does: the same non-zero exit for a supervisor to see.
      if (bound !== undefined) unfinished.push(what);
      logger.error({ err, what }, 'shutdown step failed');
    } finally {
      clearTimeout(timer);
      const tookMs = performance.now() - started;
      // The budget is for waits on Redis: a step between two of them (the store's close,
      // up to its bound) moves its end on, or Redis steps after it found it spent by a
      // disk's wait (with the default bounds the store's, 15 s, outlasts the budget, 7 s).
      if (redis === undefined && budgetEnds !== undefined) budgetEnds += tookMs;
      logger.debug({ what, ms: Math.round(tookMs) }, 'shutdown step ended');
    }
  }
  return unfinished;
}
