/**
 * Frames written to one socket in one tick leave in one system call (DESIGN.md §5
 * delivery, §6 frames): the socket is corked at the first write of a tick and uncorked
 * when the tick's work is done (`process.nextTick`, the pattern Node's stream docs give
 * for `cork`). A catch-up sends a frame per ack, and the acks of a whole window arrive
 * in one read: written one by one, each frame was a `write` of its own (tens of µs each
 * on a VM). A single live frame still leaves at once, at the end of the callback that
 * sent it.
 *
 * Corked bytes count in the socket's queue (`writableLength`, and so in `ws`'s
 * `bufferedAmount`) though the kernel was never offered them. So that they never make
 * a reading client look slow (backpressure.ts), they are written out once the queue
 * reaches {@link corkFlushBytes}; the check after each send then sees at most that many
 * of them, and a client that does not read is still caught at the send that passes the
 * high-water mark.
 *
 * No state of its own: the socket's cork count says whether a tick's cork is on (the
 * `ws` sender corks and uncorks within one call, and `sendFrames` likewise).
 */
import type { Socket } from 'node:net';

/** Most bytes held corked before they are written, bytes. */
const MAX_CORKED_BYTES = 16 * 1024;

/**
 * The queue length at which corked bytes are written out: a quarter of the high-water
 * mark, at most 16 KiB.
 * @param highWaterBytes the socket high-water mark (setting `socketHighWaterBytes`), bytes
 */
export function corkFlushBytes(highWaterBytes: number): number {
  return Math.min(MAX_CORKED_BYTES, highWaterBytes / 4);
}

/** Corks `socket` until the end of this tick, unless it is corked already. */
export function corkForThisTick(socket: Socket): void {
  if (socket.writableCorked > 0) return;
  socket.cork();
  process.nextTick(uncork, socket);
}

/**
 * Writes what is corked on `socket` once its queue holds `flushBytes` or more (the
 * tick's later writes cork it again).
 */
export function flushCorked(socket: Socket, flushBytes: number): void {
  if (socket.writableCorked > 0 && socket.writableLength >= flushBytes) socket.uncork();
}

/** Ends the tick's cork; nothing when it was written out already (the count is 0). */
function uncork(socket: Socket): void {
  socket.uncork();
}
