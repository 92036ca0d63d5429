/**
 * Ordering of a batch's appends (ingest.ts `sendBatch`, DESIGN.md §7): a user named by
 * several messages of a batch gets them in the batch's order.
 */

/**
 * The order in which a batch's messages may have their appends issued: message `i`
 * goes once it is ready (stored, or failed) and every earlier message naming one of
 * its recipients has gone. Messages go in batch order per recipient, and otherwise as
 * soon as they are ready.
 */
export class RecipientOrder {
  /** Per recipient, the batch indices of the messages naming it that have not gone, in order. */
  readonly #waiting = new Map<string, number[]>();
  readonly #named: readonly (readonly string[])[];
  /** What to run when a ready message may go; undefined until it is ready. */
  readonly #actions: ((() => void) | undefined)[];
  /** True when no recipient is named twice: every message may go as soon as it is ready. */
  readonly independent: boolean;

  /** @param named the distinct recipients of each message, in batch order */
  constructor(named: readonly (readonly string[])[]) {
    this.#named = named;
    this.#actions = new Array<(() => void) | undefined>(named.length).fill(undefined);
    let independent = true;
    named.forEach((users, i) => {
      for (const user of users) {
        const queue = this.#waiting.get(user);
        if (queue === undefined) {
          this.#waiting.set(user, [i]);
        } else {
          queue.push(i);
          independent = false;
        }
      }
    });
    this.independent = independent;
  }

  /**
   * Message `i` is ready: runs `go` now if no earlier message naming one of its
   * recipients is still waiting, else once the last of them has gone; then runs every
   * later message that was waiting only for it. (With {@link independent} true, every
   * message may go when ready: callers need not ask.)
   */
  release(i: number, go: () => void): void {
    this.#actions[i] = go;
    const runnable = [i];
    for (let next = runnable.pop(); next !== undefined; next = runnable.pop()) {
      const action = this.#actions[next];
      if (action === undefined || !this.#isFirst(next)) continue;
      this.#actions[next] = undefined;
      for (const user of this.#named[next] ?? []) {
        const queue = this.#waiting.get(user);
        queue?.shift();
        const head = queue?.[0];
        if (head !== undefined) runnable.push(head);
      }
      action();
    }
  }

  /** True when `i` is first in the queue of every recipient it names. */
  #isFirst(i: number): boolean {
    for (const user of this.#named[i] ?? []) if (this.#waiting.get(user)?.[0] !== i) return false;
    return true;
  }
}
