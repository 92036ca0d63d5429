/**
 * A Redis that stalls while a node starts (paused, busy with a long command, a fork, a
 * failover under way): it took the connection, or answered the start's first commands,
 * and then does not answer within the command timeout. The start waits for it, 30 s at
 * most in all ({@link START_STALL_WAIT_MS}), one warn line for each wait:
 *
 * - where the start connects and reads the version (redis-start.ts), the step is tried
 *   again every second ({@link StartStallWait.runner}; walk29 F9: a 2–3 s stall in the
 *   start's first second ended it, exit 1);
 * - in a later step on a shared Redis (the store claim's reads, the inbox generation,
 *   the node's registration and bus, the client_msg_id claims, the HTTP API's scripts),
 *   the start stops what it started, as a failed start does, and runs again from the
 *   connect once Redis answers (service.ts; {@link StartStallWait.again}). Those steps
 *   read, or write what a start of the same data dir writes again (its block's claim,
 *   re-asserted; a registration under a new node id, the old one removed or lapsing),
 *   so a second run is what a supervisor's restart would do, without the exit. Until
 *   this, a stall there ended the start (walk30 F1; leftovers 2) — unless it met only
 *   the renewals' connection, whose 5 s command timeout rides out a shorter one.
 *
 * Not run again: a stall while taking the store lease (the start's last Redis step,
 * after it listens), which rides out 5 s on the renewals' connection and past that ends
 * the start — a lease Redis wrote late would hold the store against the start's own
 * second run — nor one met with the embedded redis-server, which the undo would stop.
 * A start that fails on a stall names the step and the Redis ({@link startStallFailure}).
 */
import { setTimeout as delay } from 'node:timers/promises';
import { StartupError } from '../errors.js';
import type { Logger } from '../logger.js';
import { isCommandTimeout, stalledOnConnect } from '../redis/client.js';

/**
 * How long a start waits in all for a Redis that stalls, ms, counted from the first
 * stall it meets: past it, the step that met the stall ends the start. (A Redis loading
 * its data answers LOADING meanwhile, which ioredis's ready check waits out: no stall.)
 */
export const START_STALL_WAIT_MS = 30_000;

/** How long a start waits before it tries a stalled step (or the whole start) again, ms. */
const STALL_RETRY_MS = 1000;

/**
 * What a start does while it waits on a stall, in its warn line's words: tries the step
 * again (the connect and version steps: {@link StartStallWait.runner}), or stops what it
 * started and runs again (a later step on a shared Redis: service.ts `runsAgain`).
 */
export type StallThen = 'tries again every second until it does' | 'stops what it started and runs again once Redis answers';

/**
 * The kind of Redis stall `err`, or an error it was caused by, is: `connect` for a
 * connection made and its first command not answered (client.ts `stalledOnConnect`),
 * `command` for a command past the command timeout; undefined for any other error.
 */
function stallOf(err: unknown): 'connect' | 'command' | undefined {
  let command = false;
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (stalledOnConnect(e)) return 'connect';
    command ||= isCommandTimeout(e);
  }
  return command ? 'command' : undefined;
}

/** The start's failure on a Redis stall ({@link startStallFailure}): names the step it was in. */
export class StartStallFailure extends StartupError {
  /** The step the start was in, as a gerund phrase (`claiming the store`). */
  readonly step: string;

  constructor(message: string, step: string, cause: unknown) {
    super(message, { cause });
    this.step = step;
  }
}

/**
 * The start's failure for `err` when it is a Redis stall ({@link stallOf}); undefined
 * for any other (walk30 F1: it said only the API's `Redis did not answer within the
 * command timeout …; retry later`).
 * @param step the step that failed, as a gerund phrase (`claiming the store`), in the
 *   words of the `pixiu starting` line (src/cli/serve.ts)
 * @param shownUrl the Redis URL without its password (url.ts `redactUrl`)
 * @param commandTimeoutMs `PIXIU_REDIS_COMMAND_TIMEOUT`, ms
 * @returns `the start failed while <step> (Redis at <url> did not answer within the
 *   command timeout, <ms> ms): start it again once Redis answers`
 */
export function startStallFailure(err: unknown, step: string, shownUrl: string, commandTimeoutMs: number): StartStallFailure | undefined {
  const kind = stallOf(err);
  if (kind === undefined) return undefined;
  const what = kind === 'connect' ? 'took the connection but did not answer' : 'did not answer';
  return new StartStallFailure(`the start failed while ${step} (Redis at ${shownUrl} ${what} within the command timeout, ${commandTimeoutMs} ms): `
    + 'start it again once Redis answers', step, err);
}

/**
 * The waits of one start (its runs again included) on a Redis that stalls: one budget
 * of {@link START_STALL_WAIT_MS} from the first stall met, a warn line when a wait
 * begins and an info line when Redis answers again.
 */
export class StartStallWait {
  readonly #logger: Logger;
  readonly #stopAsked: () => void;
  /** When the start first met a stall (Date.now), ms; the budget counts from it. */
  #first: number | undefined;
  /** When the wait under way began, ms; undefined while none is. */
  #waiting: number | undefined;

  /**
   * @param stopAsked throws StartupError when the process was asked to stop meanwhile
   *   (start-context.ts `stopAsked`): called after each pause
   */
  constructor(logger: Logger, stopAsked: () => void) {
    this.#logger = logger;
    this.#stopAsked = stopAsked;
  }

  /**
   * For `err`, a step's failure: when it is a Redis stall and the budget is not spent,
   * pauses a second and answers true (try again); else false, at once (the caller
   * throws). The first stall of a wait is logged at warn, saying `then`.
   * @param then what the start does meanwhile, for the warn line's message
   * @param fields the warn line's fields besides `reason` and `waitMs` (`redisUrl`, `step`)
   * @throws StartupError when a stop was asked for during the pause
   */
  async again(err: unknown, then: StallThen, fields: Record<string, string>): Promise<boolean> {
    if (!this.met(err, then, fields)) return false;
    await delay(STALL_RETRY_MS);
    this.#stopAsked();
    return true;
  }

  /**
   * For `err`, a step's failure, seen now: when it is a Redis stall and the budget is not
   * spent, the budget counts from now if no stall was met before, the warn line saying
   * `then` is logged unless a wait is under way, and it answers true (the start waits);
   * else false. {@link again} calls it; a start run that fails on a stall calls it before
   * it stops what it started (service.ts), since that undo waits on the stalled Redis too:
   * counted from after it, and warned of only then, the 30 s began 11–12 s into the
   * stall, and the start ended ~42 s into it, nothing logged for its first 12 s (walk33
   * M-start).
   * @param then what the start does meanwhile, for the warn line's message
   * @param fields the warn line's fields besides `reason` and `waitMs` (`redisUrl`, `step`)
   */
  met(err: unknown, then: StallThen, fields: Record<string, string>): boolean {
    if (stallOf(err) === undefined) return false;
    const now = Date.now();
    this.#first ??= now;
    if (now - this.#first >= START_STALL_WAIT_MS) return false;
    if (this.#waiting === undefined) {
      this.#waiting = now;
      // `waitMs`: what is left of the one budget (a second wait's is less than 30 s).
      this.#logger.warn({ ...fields, reason: (err as Error).message, waitMs: START_STALL_WAIT_MS - (now - this.#first) },
        `Redis did not answer at start: the start ${then}, for 30 s at most`);
    }
    return true;
  }

  /** A step answered: a wait under way ends, said at info with `waitedMs`. */
  answered(shownUrl: string): void {
    if (this.#waiting === undefined) return;
    this.#logger.info({ redisUrl: shownUrl, waitedMs: Date.now() - this.#waiting }, 'Redis answers again: the start goes on');
    this.#waiting = undefined;
  }

  /**
   * A runner of the start's first Redis steps (connect, version) that tries a step again
   * while it fails on a stall ({@link again}); any other failure, or the last, is thrown.
   * @param shownUrl the Redis URL without its password
   */
  runner(shownUrl: string): <T>(step: () => Promise<T>) => Promise<T> {
    return async (step) => {
      for (;;) {
        try {
          const done = await step();
          this.answered(shownUrl);
          return done;
        } catch (err) {
          if (!(await this.again(err, 'tries again every second until it does', { redisUrl: shownUrl }))) throw err;
        }
      }
    };
  }
}
