/**
 * How a close the server decided is logged (ws-connection.ts `close`): a slow consumer
 * at warn — operators need to see these, and the client itself usually sees only 1006
 * (docs/protocol.md) — protocol abuse and ack timeouts at info, any other (replaced,
 * token expired, shutdown, …) at debug.
 */
import { CloseCode } from '../delivery/close-codes.js';

/** A log level a connection's lines use (error: a broadcast catch-up on a key of the wrong type, ws-connection.ts). */
export type ConnectionLogLevel = 'debug' | 'info' | 'warn' | 'error';

/** The level and message of the line that logs a server close with `code`. */
export function closeLogLine(code: number): { readonly level: ConnectionLogLevel; readonly msg: string } {
  if (code === CloseCode.slowConsumer) return { level: 'warn', msg: 'slow consumer closed' };
  if (code === CloseCode.protocolAbuse || code === CloseCode.ackTimeout) return { level: 'info', msg: 'connection closed by the server' };
  return { level: 'debug', msg: 'closing connection' };
}

/** `reason` cut to what a close frame carries (123 bytes of UTF-8; `ws` throws past it), on a character boundary. */
export function closeReason(reason: string): string {
  let r = reason.slice(0, 123);
  while (Buffer.byteLength(r) > 123) r = r.slice(0, -1);
  // Not half a surrogate pair (an emoji cut in two).
  return /[\uD800-\uDBFF]$/.test(r) ? r.slice(0, -1) : r;
}
