/**
 * The last keys seen, a bounded number of them, so that a line read again and again
 * (every fetch, redelivery and history page holding a broken record or inbox entry) is
 * logged once, not once per read, with memory that does not grow with what is broken.
 */
export class SeenKeys {
  readonly #max: number;
  /** Keys seen, oldest first (a Set keeps insertion order). */
  readonly #seen = new Set<string>();

  /** @param max most keys remembered; the oldest is forgotten past it (and counts as new when seen again) */
  constructor(max: number) {
    this.#max = max;
  }

  /** Notes `key` as seen. @returns true when it was not among the keys remembered */
  add(key: string): boolean {
    if (this.#seen.has(key)) return false;
    if (this.#seen.size >= this.#max) {
      const oldest = this.#seen.values().next().value;
      if (oldest !== undefined) this.#seen.delete(oldest);
    }
    this.#seen.add(key);
    return true;
  }
}
