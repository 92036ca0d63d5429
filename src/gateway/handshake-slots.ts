/**
 * The node's bound on WebSocket handshakes in progress, all users together
 * (`PIXIU_MAX_HANDSHAKES`; docs/protocol.md, "Connecting"). The per-user rate
 * (user-rate.ts) bounds one user's devices; nothing bounded how many handshakes the node
 * worked on at once, and each costs it the token's check, presence writes, the cursor
 * and inbox reads of its login and the window sent with `welcome`. A reconnect herd
 * after a restart (5,000 devices, one per user, at once) held the event loop for 2–4 s
 * at a time and queued thousands of commands on the node's Redis connection: the store
 * lease's renewal timed out and the node's writes were fenced, producers got 503 for
 * seconds and `/healthz` took up to 11 s (slowclient F1).
 *
 * A handshake takes a slot as soon as its request arrives (before the token is read: a
 * refusal here costs the node next to nothing) and gives it back when its `welcome` is
 * out, when it is answered with a refusal, or when its socket closes, whichever comes
 * first. Over the bound it is refused 503 `UNAVAILABLE` with `Retry-After`, which
 * clients already follow (docs/protocol.md, Close codes), and counted in
 * `pixiu_ws_handshakes_total{outcome="busy"}` (src/api/refusal-counts.ts).
 */
import { unavailable } from '../errors.js';
import { markBoundRefusal } from './handshake-refusals.js';

/** The handshakes this node works on now, bounded. */
export class HandshakeSlots {
  readonly #limit: number;
  #inUse = 0;

  /** @param limit handshakes in progress at most (`PIXIU_MAX_HANDSHAKES`), ≥ 1 */
  constructor(limit: number) {
    this.#limit = limit;
  }

  /** Handshakes in progress now. */
  get inUse(): number {
    return this.#inUse;
  }

  /**
   * Takes a slot for one handshake.
   * @returns the function that gives it back; calling it again does nothing
   * @throws PixiuError UNAVAILABLE (503, `Retry-After`) when the bound's handshakes are in
   *   progress, marked `busy` (handshake-refusals.ts) for `pixiu_ws_handshakes_total`
   */
  take(): () => void {
    if (this.#inUse >= this.#limit) {
      throw markBoundRefusal(unavailable(`this node is busy with other WebSocket handshakes (${this.#inUse} in progress: PIXIU_MAX_HANDSHAKES); retry after its Retry-After`), 'busy');
    }
    this.#inUse += 1;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.#inUse -= 1;
    };
  }
}
