/**
 * The lingering close (RFC 9112 §9.6) of an HTTP connection the server ends after an
 * answer its client may not have finished sending for: an error answered before the
 * request's body arrived (error-handler.ts `sendError`), a client error's raw answer, the
 * CONNECT refusal, the pipelining bound's 429. The server stops writing (FIN) and reads
 * and drops what the client still sends for a while, so that the client sees the answer
 * rather than a reset.
 */
import type { Socket } from 'node:net';
import { dropIncoming } from '../drop-incoming.js';

/**
 * How long a connection closed after an early answer (or a client error's: a 408, a
 * 400 for bytes that are not HTTP) keeps reading what the client still sends, ms.
 */
export const LINGER_MS = 2000;
/** Most bytes read (and dropped) meanwhile: past it the connection is cut. */
export const LINGER_MAX_BYTES = 64 * 1024 * 1024;

const lingering = new WeakSet<Socket>();

/**
 * A lingering close (RFC 9112 §9.6) for a connection answered before its request body
 * has all arrived (a body over the limit, a refused token), or refused a request
 * pipelined past its bound (pipelining-bound.ts): once the answer is out,
 * the server stops writing (FIN) but keeps reading and dropping what the client still
 * sends (drop-incoming.ts), until the client closes, {@link LINGER_MS} pass or
 * {@link LINGER_MAX_BYTES} arrive. Closed at once instead, data still arriving made the
 * kernel answer with a reset, and a client still uploading (Node's `fetch` with a
 * 24 MiB body) saw EPIPE rather than the 413 it had been sent.
 */
export function lingerOnClose(socket: Socket | null | undefined): void {
  if (!socket || lingering.has(socket)) return;
  lingering.add(socket);
  // Node ends a `Connection: close` response's socket with destroySoon (FIN, then destroy
  // once written); here the destroy waits for the client instead.
  socket.destroySoon = function lingeringClose(this: Socket): void {
    lingeringEnd(this);
  };
}

/**
 * Ends `socket` with a lingering close (see {@link lingerOnClose}): writes `last` (if
 * any) and a FIN, then reads and drops what the client still sends until its end,
 * {@link LINGER_MS} or {@link LINGER_MAX_BYTES}, whichever is first. For the HTTP
 * answers sent before a request body arrived, the client errors' raw answers (a 408,
 * a 400 or 431 from the parser: error-handler.ts `clientErrorAnswerer`) and the CONNECT refusal
 * (connect-method.ts).
 */
export function lingeringEnd(socket: Socket, last?: Buffer | string): void {
  dropIncoming(socket, { maxBytes: LINGER_MAX_BYTES, ms: LINGER_MS });
  // The server's socket half-opens (allowHalfOpen): the client's end is the close.
  socket.once('end', () => socket.destroy());
  if (!socket.writable) return;
  if (last === undefined) socket.end();
  else socket.end(last);
}
