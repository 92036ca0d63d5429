/**
 * The background loop that runs each partition's expiry sweep every
 * `sweepIntervalMs` (DESIGN.md §3: retention). A failing sweep is logged at error and
 * the loop backs off (the wait doubles per failure up to 64 intervals, capped at 10
 * minutes unless one interval is longer); it never spins and never drops an error
 * silently.
 */
import type { Logger } from '../logger.js';

const MAX_BACKOFF_STEPS = 6;
const MAX_BACKOFF_MS = 10 * 60_000;

/** Runs `sweep` on a timer until stopped. */
export class Sweeper {
  readonly #sweep: () => Promise<number>;
  readonly #intervalMs: number;
  readonly #logger: Logger | undefined;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> = Promise.resolve();
  #failures = 0;
  #stopped = false;

  /**
   * @param sweep one full sweep; resolves with the records deleted
   * @param intervalMs wait between sweeps, ms
   * @param logger where sweeps and failures are logged
   */
  constructor(sweep: () => Promise<number>, intervalMs: number, logger?: Logger) {
    this.#sweep = sweep;
    this.#intervalMs = intervalMs;
    this.#logger = logger;
  }

  /** Schedules the first sweep one interval from now. */
  start(): void {
    this.#schedule(this.#intervalMs);
  }

  /** Stops the timer and waits for a sweep in progress. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    // unref: a pending sweep must not keep the process alive.
    this.#timer = setTimeout(() => {
      this.#running = this.#tick();
    }, delayMs).unref();
  }

  async #tick(): Promise<void> {
    try {
      const deleted = await this.#sweep();
      this.#failures = 0;
      if (deleted > 0) this.#logger?.debug({ deleted }, 'expired messages swept');
    } catch (err) {
      this.#failures++;
      this.#logger?.error({ err, failures: this.#failures }, 'store sweep failed');
    }
    const steps = Math.min(this.#failures, MAX_BACKOFF_STEPS);
    const delayMs = steps === 0 ? this.#intervalMs : Math.max(this.#intervalMs, Math.min(this.#intervalMs * 2 ** steps, MAX_BACKOFF_MS));
    this.#schedule(delayMs);
  }
}
