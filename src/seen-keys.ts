/**
 * The last keys seen, a bounded number of them, so that a line read again and again
 * (every fetch, redelivery and history page holding a broken record or inbox entry) is
 * logged once, not once per read, with memory that does not grow with what is broken.
 * Kept in an `lru-cache` (as the record and frame caches are), read with `has`, which
 * does not refresh a key: the oldest key seen is the first forgotten.
 */
import { LRUCache } from 'lru-cache';

/** A bounded set of the last keys seen: `add(key)` is true once per key while it is remembered. */
export class SeenKeys {
  readonly #seen: LRUCache<string, true>;

  /** @param max most keys remembered; the oldest is forgotten past it (and counts as new when seen again) */
  constructor(max: number) {
    this.#seen = new LRUCache<string, true>({ max });
  }

  /** Notes `key` as seen. @returns true when it was not among the keys remembered */
  add(key: string): boolean {
    if (this.#seen.has(key)) return false;
    this.#seen.set(key, true);
    return true;
  }
}
