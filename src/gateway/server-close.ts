/**
 * How the server ends a WebSocket it decided to close (DESIGN.md §6; ws-connection.ts
 * `close`): the close frame with its code and reason, then a grace for the peer's own
 * close frame, after which a peer that does not answer is cut. A connection closed for
 * protocol abuse (4003) has what its client goes on sending dropped unparsed meanwhile
 * (receiver-refusals.ts `dropClientBytes`).
 */
import type { Socket } from 'node:net';
import type { WebSocket } from 'ws';
import { CloseCode } from '../delivery/close-codes.js';
import { closeReason } from './close-log.js';
import { abuseDropBytes } from './frame-limits.js';
import { dropClientBytes } from './receiver-refusals.js';

/** After a close frame to a peer that does not answer, the socket is destroyed, ms. */
export const CLOSE_GRACE_MS = 5000;

/**
 * Sends `ws` a close frame of `code` and `reason` (cut to what a close frame carries:
 * close-log.ts `closeReason`) and destroys it {@link CLOSE_GRACE_MS} later unless the
 * peer's close frame ends it first. No time limit of its own keeps the process up.
 * @param socket the TCP socket under `ws`, from which a 4003's client bytes are dropped; undefined: not found
 * @param maxClientFrameBytes `PIXIU_MAX_CLIENT_FRAME_BYTES`, which sizes that drop (frame-limits.ts `abuseDropBytes`)
 */
export function closeWebSocket(ws: WebSocket, socket: Socket | undefined, code: number, reason: string, maxClientFrameBytes: number): void {
  ws.close(code, closeReason(reason));
  if (code === CloseCode.protocolAbuse && socket !== undefined) dropClientBytes(socket, { maxBytes: abuseDropBytes(maxClientFrameBytes) }, ws);
  setTimeout(() => ws.terminate(), CLOSE_GRACE_MS).unref();
}
