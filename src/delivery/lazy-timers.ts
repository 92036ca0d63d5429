/**
 * One timer per key, re-armed lazily: a connection's redelivery timer (DESIGN.md §5).
 *
 * The machine asks for a connection's timer again on every ack ("due in d ms from
 * now"), and an ack moves that due time later, so clearing and re-creating a Node timer
 * per ack was two timer-list operations and a `Timeout` object for every message (a
 * catch-up acks thousands a second). Here the timer already armed is kept and only the
 * new due time noted; when it fires before that time it re-arms for the rest. A key is
 * never reported due before the last due time asked for, and late by no more than a
 * Node timer is (plus one re-arm when the due time moved).
 *
 * Due times are on a clock that never steps (`performance.now()`), as Node's timers
 * are: on the wall clock, a backward step of an hour made a timer that fired re-arm
 * for the rest, an hour, holding a connection's redelivery (and its 4008) that long;
 * a forward step reported a key whose due time an ack had moved later due at once
 * (the walk31 tester's F4 asked for the gateway's and delivery's timers to be checked).
 */

interface Entry {
  /** When the key is due, ms on the timers' clock (default `performance.now()`). */
  due: number;
  timer: NodeJS.Timeout;
}

/** Lazily re-armed timers by key; `onDue(key)` runs once each armed key's time has come. */
export class LazyTimers<K> {
  readonly #entries = new Map<K, Entry>();
  readonly #onDue: (key: K) => void;
  readonly #now: () => number;

  /**
   * @param onDue called when a key's last due time has passed (the key is disarmed first)
   * @param now the clock due times are on, ms; default `performance.now` (a test's mocked one)
   */
  constructor(onDue: (key: K) => void, now: () => number = () => performance.now()) {
    this.#onDue = onDue;
    this.#now = now;
  }

  /**
   * Makes `key` due `delayMs` from now, replacing its earlier due time whether later or
   * sooner; `null` disarms it.
   */
  set(key: K, delayMs: number | null): void {
    const entry = this.#entries.get(key);
    if (delayMs === null) {
      if (entry !== undefined) {
        clearTimeout(entry.timer);
        this.#entries.delete(key);
      }
      return;
    }
    const due = this.#now() + delayMs;
    if (entry !== undefined) {
      // Armed to fire no later than the new time: it re-arms itself for the rest.
      if (entry.due <= due) {
        entry.due = due;
        return;
      }
      clearTimeout(entry.timer);
    }
    const fresh: Entry = { due, timer: setTimeout(() => this.#fire(key, fresh), delayMs) };
    this.#entries.set(key, fresh);
  }

  /** True while `key` is armed. */
  has(key: K): boolean {
    return this.#entries.has(key);
  }

  #fire(key: K, entry: Entry): void {
    if (this.#entries.get(key) !== entry) return;
    const rest = entry.due - this.#now();
    if (rest > 0) {
      entry.timer = setTimeout(() => this.#fire(key, entry), rest);
      return;
    }
    this.#entries.delete(key);
    this.#onDue(key);
  }
}
