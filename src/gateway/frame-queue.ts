/**
 * The order in which one connection's client frames are handled (docs/protocol.md,
 * "Client → server"): one at a time, in the order they came, none before the queue is
 * opened (once `welcome` is out: `welcome` is always the first frame a client gets).
 * A frame whose handling waits on something (`sub` on Redis, `refresh` on the key
 * source) holds the frames after it until it is done, so answers go out in the order
 * of the frames they answer. At most `max` frames are held.
 *
 * An item the `overtakes` test picks (an `ack`: cumulative, answered by nothing but a
 * refusal) is handled on arrival once the queue is open, also while an item ahead of
 * it waits, and is never held: a client acking a backlog as it reads it while a `sub`
 * waited on Redis sent more than `max` acks behind it and was closed for it.
 */

/** Handles one item; a promise (which must never reject) makes the next item wait for it. */
export type ItemHandler<T> = (item: T) => Promise<void> | undefined;

/** A bounded, ordered queue of client frames. */
export class FrameQueue<T> {
  readonly #max: number;
  readonly #handle: ItemHandler<T>;
  readonly #overtakes: ((item: T) => boolean) | undefined;
  readonly #held: T[] = [];
  #open = false;
  #busy = false;
  #stopped = false;

  /**
   * @param max most items held at once (before opening, or behind a running one)
   * @param handle handles one item
   * @param overtakes true for an item handled at once while an item ahead of it waits
   *   (its handling must not wait: `handle` answers undefined for it)
   */
  constructor(max: number, handle: ItemHandler<T>, overtakes?: (item: T) => boolean) {
    this.#max = max;
    this.#handle = handle;
    this.#overtakes = overtakes;
  }

  /**
   * Adds an item and handles what can be handled now.
   * @returns false (and drops the item) when `max` items are already held
   */
  push(item: T): boolean {
    if (this.#stopped) return true;
    if (this.#open && this.#busy && this.#overtakes?.(item) === true) {
      void this.#handle(item);
      return true;
    }
    if (this.#held.length >= this.#max) return false;
    this.#held.push(item);
    this.#run();
    return true;
  }

  /** Items may be handled from now on (those held so far first). */
  open(): void {
    this.#open = true;
    this.#run();
  }

  /** Drops what is held and handles nothing more (the connection is closing). */
  stop(): void {
    this.#stopped = true;
    this.#held.length = 0;
  }

  #run(): void {
    while (this.#open && !this.#busy && !this.#stopped) {
      if (this.#held.length === 0) return;
      const pending = this.#handle(this.#held.shift() as T);
      if (pending !== undefined) {
        this.#busy = true;
        void pending.finally(() => {
          this.#busy = false;
          this.#run();
        });
      }
    }
  }
}
