/**
 * The node's budgets for messages in progress — batches and single `POST /v1/messages`
 * alike, from the moment their body is parsed until they are answered (docs/api.md,
 * "Messages"; docs/decisions.md, "Ingest"):
 *
 * - recipients, twice `PIXIU_BATCH_MAX_RECIPIENTS` (a room message counts its members):
 *   each is an inbox append waiting its turn, and ~1.5 KB of memory until it is done, so
 *   twenty full batches at once held 3 GB and stalled the event loop (and `/healthz`) for
 *   seconds, and sixty room messages to 10,000 members each, posted at once, took 462 MB
 *   (a reviewer's finding: single POSTs took nothing from it then);
 * - bytes of request bodies, {@link INGEST_BODIES_IN_PROGRESS} times
 *   `PIXIU_MAX_BODY_BYTES` (64 MiB by default): the recipients alone let a stalled store
 *   hold 200,000 single-recipient messages of 60 KiB, ~13 GB, before the first 503 (a
 *   reviewer's finding, with the disk frozen). The body is what a request holds while it
 *   waits (parsed, then encoded for the store), about its size again.
 *
 * A request that does not fit is refused whole with UNAVAILABLE (503, `Retry-After`)
 * before anything is stored; one request alone always fits.
 */
import { PixiuError, unavailable } from '../../errors.js';
import { refuseOwnFaults, type MessageBody } from './batch-items.js';

/** The byte budget in request bodies at the size limit: 64 (64 MiB with the default 1 MiB). */
export const INGEST_BODIES_IN_PROGRESS = 64;

/** A node-wide bound on something the messages in progress hold (recipients, bytes). */
export class InProgressBudget {
  readonly #limit: number;
  readonly #unit: string;
  readonly #onChange: ((inUse: number) => void) | undefined;
  #inUse = 0;

  /**
   * @param limit how much the messages in progress may hold at once, node-wide
   * @param unit what is counted, as the refusal says it ("recipients", "bytes of messages")
   * @param onChange told the amount in progress after each change (a metric)
   */
  constructor(limit: number, unit = 'recipients', onChange?: (inUse: number) => void) {
    this.#limit = limit;
    this.#unit = unit;
    this.#onChange = onChange;
  }

  /**
   * What a request may take now: any amount while nothing is in progress (one request
   * alone always fits), else what is left of the limit.
   */
  get free(): number {
    return this.#inUse === 0 ? Infinity : this.#limit - this.#inUse;
  }

  /**
   * Takes `amount` from the budget for one request. A caller whose request may be
   * refused for itself (a message over the size limit: 413) checks that when this
   * throws, before answering 503, so that a bad request gets its own error whatever the
   * load (DESIGN.md §7) and a good one is not encoded twice on the way in.
   * @param what the request, in the refusal's words
   * @returns the function that gives it back (call it once the request is answered)
   * @throws PixiuError UNAVAILABLE when other requests hold too much of it
   */
  take(amount: number, what: 'batch' | 'message' = 'batch'): () => void {
    if (amount > this.free) {
      throw unavailable(`this node is busy with other messages (${this.#inUse} ${this.#unit} in progress); retry the ${what} shortly`);
    }
    this.#inUse += amount;
    this.#onChange?.(this.#inUse);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.#inUse -= amount;
      this.#onChange?.(this.#inUse);
    };
  }
}

/**
 * Takes a batch's body bytes from the node's byte budget. When they do not fit, the
 * items refused for themselves (over the size limit) are replaced in `items` by their
 * errors, as the recipient budget does (batch-items.ts `refuseOwnFaults`), and a batch
 * left with no item to send takes nothing: it is answered with their errors whatever
 * the load.
 * @param uncounted items not counted in the recipients (batch-items.ts `crossKindRepeats`)
 * @returns the function that gives the bytes back
 * @throws PixiuError UNAVAILABLE when the batch has an item to send and does not fit
 */
export function takeBatchBytes(
  budget: InProgressBudget, bytes: number, items: (MessageBody | PixiuError)[], uncounted: ReadonlySet<number>,
  recipientsOf: (item: MessageBody) => number, check: (item: MessageBody) => void,
): () => void {
  try {
    return budget.take(bytes);
  } catch (err) {
    // Stops at the first good item with a recipient: the batch is 503 then whatever follows.
    refuseOwnFaults(items, uncounted, recipientsOf, check, 0);
    if (items.some((c) => !(c instanceof PixiuError))) throw err;
    return () => undefined;
  }
}
