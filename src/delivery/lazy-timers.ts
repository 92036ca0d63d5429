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
 */

interface Entry {
  /** When the key is due, ms since the epoch (`Date.now()`). */
  due: number;
  timer: NodeJS.Timeout;
}

/** Lazily re-armed timers by key; `onDue(key)` runs once each armed key's time has come. */
export class LazyTimers<K> {
  readonly #entries = new Map<K, Entry>();
  readonly #onDue: (key: K) => void;

  /** @param onDue called when a key's last due time has passed (the key is disarmed first) */
  constructor(onDue: (key: K) => void) {
    this.#onDue = onDue;
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
    const due = Date.now() + delayMs;
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
    const rest = entry.due - Date.now();
    if (rest > 0) {
      entry.timer = setTimeout(() => this.#fire(key, entry), rest);
      return;
    }
    this.#entries.delete(key);
    this.#onDue(key);
  }
}
