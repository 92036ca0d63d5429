/**
 * Reading and dropping what a peer still sends on a connection the server is closing,
 * within a byte cap and a time limit: an HTTP connection answered before its request
 * body arrived (a lingering close, RFC 9112 §9.6: src/api/lingering-close.ts) and a
 * WebSocket closed 4003 for protocol abuse (src/gateway/receiver-refusals.ts). Read on,
 * the client still sees the server's last answer (a reset would discard it) and its own
 * end still ends the connection; the cap and the limit keep a client that never stops
 * sending from holding the socket, or the node's reading, for longer.
 */
import type { Socket } from 'node:net';

/** How long, and how much, {@link dropIncoming} reads before it cuts the connection. */
export interface DropLimits {
  /** Most bytes read (and dropped): one past them destroys the socket. */
  readonly maxBytes: number;
  /**
   * After this long the socket is destroyed, whatever was read, ms; undefined when the
   * caller's own timer ends the connection (a WebSocket's close grace, ws-connection.ts).
   */
  readonly ms?: number;
}

/** The sockets {@link dropIncoming} reads and drops from already. */
const dropping = new WeakSet<Socket>();

/**
 * Reads and drops everything that arrives on `socket` from now on, and destroys it once
 * more than `limits.maxBytes` arrived or `limits.ms` (when given) passed, whichever is first. The
 * caller takes off the listeners that would otherwise parse those bytes (an HTTP
 * parser, `ws`'s receiver) and decides what the peer's end does: this adds a
 * 'data' listener that only counts, and a once 'error' listener (the socket is
 * destroyed then anyway), and clears its timer when the socket closes. On a socket
 * it drops from already (the pipelining bound's refusal, then its lingering close:
 * api/pipelining-bound.ts) it adds only the time limit, the first call's count and
 * cap going on, and starts reading again.
 */
export function dropIncoming(socket: Socket, limits: DropLimits): void {
  const cut = (): void => { socket.destroy(); };
  if (limits.ms !== undefined) {
    const timer = setTimeout(cut, limits.ms);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  }
  if (!dropping.has(socket)) {
    dropping.add(socket);
    socket.once('error', cut);
    let dropped = 0;
    socket.on('data', (chunk: Buffer) => {
      dropped += chunk.length;
      if (dropped > limits.maxBytes) cut();
    });
  }
  socket.resume();
  restartReading(socket);
}

/**
 * Starts reading `socket` again when it was stopped on its handle under a read still
 * pending. Node's HTTP server does that: a body that arrived with its headers fills the
 * unread request, whose backpressure stops the socket's handle directly (`readStop`),
 * leaving the stream's read pending: `resume()` then reads nothing, and the upload
 * stalled until the linger timer cut it (a fresh tester's client saw EPIPE 7 times in
 * 10). This is what Node's own `onSocketResume` (lib/_http_server.js) does, which is
 * detached along with the HTTP parser. A socket stopped as a stream (`ws` pauses it when
 * its receiver is full) is restarted by `resume()` alone; this changes nothing there.
 */
function restartReading(socket: Socket): void {
  const handle = (socket as unknown as { _handle?: { reading?: boolean; readStart?: () => number } | null })._handle;
  if (handle?.reading === false && typeof handle.readStart === 'function') {
    handle.reading = true;
    handle.readStart();
  }
}
