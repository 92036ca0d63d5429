/**
 * Memory for encoded records: slices of shared 64 KiB buffers, handed out in order.
 *
 * A put encodes its record once, outside the JavaScript heap, as soon as it is
 * checked; the buffer goes to LevelDB. One allocation per record costs about a
 * microsecond (a new ArrayBuffer each), and a slice of Node's general buffer pool
 * would share its slab with unrelated short-lived buffers. The read cache copies the
 * records it keeps (record-cache.ts `setWritten`): one cached slice kept its whole slab
 * alive, and the few records cached (those with a recipient online) each pinned one.
 *
 * Use: `reserve` room for the most a record can take, write into it, then `commit`
 * what was written; nothing may run between the two (no await), which is what makes
 * one shared arena safe on one thread.
 */

const SLAB_BYTES = 64 * 1024;

/** Hands out buffers for encoded records. Not shared between threads. */
export class RecordArena {
  /** The largest reservation: bigger records get buffers of their own. */
  readonly maxReserve = SLAB_BYTES / 4;
  #slab = Buffer.allocUnsafeSlow(SLAB_BYTES);
  #used = 0;

  /** The slab that {@link reserve} offsets point into. */
  get slab(): Buffer {
    return this.#slab;
  }

  /**
   * Makes room for `maxBytes` (at most {@link maxReserve}) at the free end of
   * {@link slab}; nothing is taken until {@link commit}.
   * @returns the offset in {@link slab} to write at
   */
  reserve(maxBytes: number): number {
    if (maxBytes > this.maxReserve) throw new RangeError(`reserve of ${maxBytes} bytes over ${this.maxReserve}`);
    if (this.#used + maxBytes > SLAB_BYTES) {
      this.#slab = Buffer.allocUnsafeSlow(SLAB_BYTES);
      this.#used = 0;
    }
    return this.#used;
  }

  /** Takes the first `bytes` from the last reserved offset; answers them. */
  commit(bytes: number): Buffer {
    const start = this.#used;
    this.#used += bytes;
    return this.#slab.subarray(start, this.#used);
  }
}
