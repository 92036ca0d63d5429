/**
 * A partition's write-latency watchdog (src/store/partition.ts). A write to a stalled
 * disk — a frozen file system, a dying disk, a network volume's hiccup — does not fail:
 * its fsync just does not return, for seconds or for good. Nothing else bounds it, so
 * without a watchdog every put behind it waited with no deadline, new puts kept
 * queueing (memory growing with them) and readiness still said "ready" (a reviewer
 * reproduced it with `fsfreeze`). Here each step of the partition's write loop (a batch
 * write with its wait for a write slot, or a job between writes: group-commit.ts) is
 * timed; one that runs longer than the limit (`PIXIU_STORE_WRITE_TIMEOUT`) makes the
 * partition stalled until it ends, which the partition answers by failing the puts that
 * wait and refusing new ones (docs/decisions.md, "Message store").
 *
 * One timer per partition, armed once per limit at most rather than per write: when it
 * fires during a step younger than the limit it is armed again for the rest. A step
 * past the limit is judged stalled one turn of the event loop later (`setImmediate`),
 * after the loop's poll phase has delivered the write's completion if it is there: an
 * event loop held past the limit (a long pause) runs the overdue timer before it, and
 * would otherwise take a write that ended meanwhile for a stalled one.
 */
import { unavailable, type PixiuError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { StepWatch } from './group-commit.js';

/** The write timeout when none is given, ms (`PIXIU_STORE_WRITE_TIMEOUT`'s default). */
export const DEFAULT_WRITE_TIMEOUT_MS = 10_000;

/** What {@link WriteStall} needs of its partition. */
export interface WriteStallOptions {
  /** Partition number, for messages. */
  readonly index: number;
  /** How long one step may run before the partition is stalled, ms. */
  readonly limitMs: number;
  /**
   * A step has run past the limit: the stall begins, and `refusal` is what the puts
   * waiting are to be answered (the partition fails them). Called once per stall, after
   * the stall is logged.
   */
  readonly onStall: (refusal: PixiuError) => void;
  /** Where a stall (at error) and its end (at warn) are logged, with `ms`. */
  readonly logger?: Logger | undefined;
  /** A clock that never steps, ms; default `performance.now`. */
  readonly clock?: () => number;
}

/** Times the steps of one partition's write loop against a limit. */
export class WriteStall implements StepWatch {
  readonly #o: WriteStallOptions;
  readonly #clock: () => number;
  /** When the step running now began, on {@link #clock}; undefined between steps. */
  #began: number | undefined;
  #stalled = false;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: WriteStallOptions) {
    this.#o = options;
    this.#clock = options.clock ?? (() => performance.now());
  }

  /** The limit, ms. */
  get limitMs(): number {
    return this.#o.limitMs;
  }

  /** True from the moment a step was judged stalled until it ends. */
  get stalled(): boolean {
    return this.#stalled;
  }

  /** How long the step running now has run, ms; undefined between steps. */
  runningMs(): number | undefined {
    return this.#began === undefined ? undefined : this.#clock() - this.#began;
  }

  /** A new UNAVAILABLE error for a write refused now, while stalled; undefined otherwise. */
  refusal(): PixiuError | undefined {
    if (!this.#stalled) return undefined;
    const limit = this.#o.limitMs;
    const words = limit % 1000 === 0 ? `${limit / 1000} s` : `${limit} ms`;
    return unavailable(`message store partition ${this.#o.index} has had a write in flight for over ${words} `
      + '(PIXIU_STORE_WRITE_TIMEOUT; a stalled disk?): it takes no writes until that write ends');
  }

  /** A step begins (steps of one loop never overlap). */
  begin(): void {
    this.#began = this.#clock();
    this.#arm(this.#o.limitMs);
  }

  /** The step that began last has ended. */
  end(): void {
    const began = this.#began;
    this.#began = undefined;
    if (!this.#stalled || began === undefined) return;
    this.#stalled = false;
    this.#o.logger?.warn({ ms: Math.round(this.#clock() - began) }, 'store partition write ended after a stall: it takes writes again unless that write failed');
  }

  /** Stops the timer (the partition is closing). */
  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(ms: number): void {
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#check();
    }, ms);
    this.#timer.unref();
  }

  #check(): void {
    const began = this.#began;
    if (began === undefined || this.#stalled) return;
    const left = began + this.#o.limitMs - this.#clock();
    if (left > 0) {
      this.#arm(left);
      return;
    }
    setImmediate(() => {
      // Still the same step, not stalled yet (see the module comment).
      if (this.#began !== began || this.#stalled) return;
      this.#stalled = true;
      this.#o.logger?.error({ ms: Math.round(this.#clock() - began), limitMs: this.#o.limitMs },
        'store partition write stalled: it takes no writes until that write ends (a frozen or failing disk?)');
      this.#o.onStall(this.refusal() as PixiuError);
    });
  }
}
