/**
 * Items keyed by their own `id`, in the order they were added: the part of a `Map` a
 * user's session and its machine use for the user's connections on this node
 * (session.ts, machine.ts). Most users have one connection, so one item is held in a
 * field and a `Map` made only for a second: a `Map` with one entry costs ~185 bytes of
 * heap (its hash table is made for four), and each idle connection had two of them
 * (bench/README.md, 2026-12-05 memtrim; presence-held.ts does the same for its ids).
 */

/** Items by id; see the module comment. Not to be changed while iterated. */
export class ById<T extends { readonly id: string }> implements Iterable<T> {
  /** The item while there is exactly one; else undefined. */
  #one: T | undefined;
  /** The items while there are two or more, by id in the order added; else undefined. */
  #many: Map<string, T> | undefined;

  /** How many items there are. */
  get size(): number {
    if (this.#many !== undefined) return this.#many.size;
    return this.#one === undefined ? 0 : 1;
  }

  /** The item of `id`, if any. */
  get(id: string): T | undefined {
    if (this.#many !== undefined) return this.#many.get(id);
    return this.#one?.id === id ? this.#one : undefined;
  }

  /** Adds `item` after the others, or puts it in the place of the one with its id. */
  set(item: T): void {
    const one = this.#one;
    if (this.#many !== undefined) {
      this.#many.set(item.id, item);
    } else if (one === undefined || one.id === item.id) {
      this.#one = item;
    } else {
      this.#many = new Map([[one.id, one], [item.id, item]]);
      this.#one = undefined;
    }
  }

  /** Removes the item of `id`. @returns whether there was one */
  delete(id: string): boolean {
    const many = this.#many;
    if (many === undefined) {
      if (this.#one?.id !== id) return false;
      this.#one = undefined;
      return true;
    }
    if (!many.delete(id)) return false;
    if (many.size === 1) {
      this.#one = many.values().next().value;
      this.#many = undefined;
    }
    return true;
  }

  /** The items, in the order added. */
  [Symbol.iterator](): Iterator<T> {
    if (this.#many !== undefined) return this.#many.values();
    return (this.#one === undefined ? [] : [this.#one]).values();
  }
}
