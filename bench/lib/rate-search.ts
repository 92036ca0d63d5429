/**
 * bench:e2e's search for the highest sustainable rate of live delivery: the criterion
 * a step is judged by, and the search (doubling from a start rate until a step fails,
 * then geometric bisection between the best good and the worst bad rate).
 */
import type { StepResult } from './e2e-protocol.js';

/** Sustainable: every POST 2xx, and delivered within the step ≥ this share of offered… */
export const DELIVERED_MIN = 0.95;
/** …and every message delivered within this grace after the step… */
export const GRACE_MS = 2000;
/** …and p99 at or under this. */
export const P99_BOUND_MS = 200;

/** The criterion, printed with the figures. */
export const CRITERION = `sustainable = every POST answered 2xx, delivered within the step >= ${DELIVERED_MIN * 100} % of offered, `
  + `every message delivered by ${GRACE_MS / 1000} s after the step, and p99 <= ${P99_BOUND_MS} ms`;

/** Lowest and highest rates the search tries, msg/s. */
const MIN_RATE = 100;
const MAX_RATE = 64_000;
/** Bisection steps after the first failure. */
const BISECTS = 2;

/** Whether a step was sustainable by {@link CRITERION}, and if not, why. */
export function judge(r: StepResult): { ok: boolean; why: string } {
  const why: string[] = [];
  if (r.postFailed > 0) why.push(`${r.postFailed} POSTs failed (${r.firstPostError ?? ''})`);
  if (r.shed > 0) why.push(`${r.shed} POSTs shed unsent`);
  const delivered = r.deliveredInWindow / r.seconds;
  if (delivered < DELIVERED_MIN * r.rate) why.push(`delivered ${Math.round(delivered)}/s < ${DELIVERED_MIN * 100} %`);
  const late = r.issued - r.deliveredInWindow - r.deliveredInGrace;
  if (late > 0) why.push(`${late} not delivered within the grace`);
  if (r.latency.p99 > P99_BOUND_MS) why.push(`p99 ${r.latency.p99.toFixed(0)} ms`);
  return { ok: why.length === 0, why: why.join(', ') };
}

/** A rate rounded to 50 msg/s, at least the minimum. */
export function roundRate(r: number): number {
  return Math.max(MIN_RATE, Math.round(r / 50) * 50);
}

/** Doubling from a start rate until a step fails, then geometric bisection. */
export class RateSearch {
  /** Each rate tried and how it went, in order, e.g. `2,000 ok`. */
  readonly tried: string[] = [];
  #good: number | undefined;
  #bad: number | undefined;
  #bisects = 0;

  constructor(readonly start: number) {}

  /** The highest sustainable rate found (0: none). */
  get max(): number {
    return this.#good ?? 0;
  }

  /** The next rate to try; undefined when the search is over. */
  next(): number | undefined {
    const good = this.#good;
    const bad = this.#bad;
    if (bad === undefined) {
      const r = good === undefined ? this.start : good * 2;
      return r <= MAX_RATE ? r : undefined;
    }
    if (good === undefined) {
      const r = roundRate(bad / 2);
      return r < bad ? r : undefined;
    }
    if (this.#bisects >= BISECTS || bad / good <= 1.1) return undefined;
    return roundRate(Math.sqrt(good * bad));
  }

  /** Records how `rate` went; `note` is shown with it (e.g. a retry). */
  record(rate: number, ok: boolean, note = ''): void {
    if (this.#good !== undefined && this.#bad !== undefined) this.#bisects += 1;
    this.tried.push(`${rate.toLocaleString('en-US')} ${ok ? 'ok' : 'no'}${note}`);
    if (ok) this.#good = Math.max(this.#good ?? 0, rate);
    else this.#bad = Math.min(this.#bad ?? Number.POSITIVE_INFINITY, rate);
  }
}
