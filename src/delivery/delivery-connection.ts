/**
 * A connection as delivery sees it (session.ts performs the machine's effects on it);
 * the gateway implements it over a WebSocket (src/gateway/ws-connection.ts).
 */
import type { ByteRoom } from './effects.js';
import type { FrameType } from './frames.js';

/** A connection as delivery sees it; the gateway implements it over a WebSocket. */
export interface DeliveryConnection extends Partial<ByteRoom> {
  readonly id: string;
  readonly device: string;
  /**
   * Writes one serialised frame of type `t` (counted by type): its JSON text, or that
   * text's UTF-8 bytes (a `msg`, msg-frame-bytes.ts), sent as a text frame either way.
   * Never throws; a closed connection drops it.
   */
  send(text: string | Buffer, t: FrameType): void;
  /** Closes with a WebSocket close code (DESIGN.md §6). */
  close(code: number, reason: string): void;
  /** Called right after its `welcome` frame was written (other feeds may start then). */
  welcomed?(): void;
  /** The `bseq` its `welcome` carries (WelcomeFrame `bseq`); undefined: none. Asked once, as `welcome` is written. */
  welcomeBseq?(): string | undefined;
  /**
   * A page to it was cut at its byte allowance (effects.ts `hold`; `byteAllowance`, from
   * ByteRoom, says what a page may write): the session's `drain` is to be called once its
   * writes drain, as after a pause. Asked only of a connection that gives `byteAllowance`.
   * @param byBudget that allowance was the node budget's floor (effects.ts `PageAllowance`,
   *   as it was when the page was built): the pause is the budget's
   */
  hold?(byBudget: boolean): void;
}
