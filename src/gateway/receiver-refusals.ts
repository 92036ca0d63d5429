/**
 * What a connection closes with when `ws`'s receiver refuses a client frame: the
 * receiver's error codes mapped to the close codes of RFC 6455 §7.4.1, so that the
 * close is counted and logged as what the server decided (ws-connection.ts); and how it
 * stops reading a client it closed for abuse.
 */
import type { Socket } from 'node:net';

/**
 * The close code `ws` sends when its receiver refuses a client frame (RFC 6455 §7.4.1):
 * 1009 for a frame over the size cap, 1008 for too many fragments, 1007 for text that
 * is not UTF-8, 1002 for any other protocol error. Undefined for other errors (a socket
 * error: the peer is gone, 1006).
 */
export function refusalCloseCode(err: Error & { code?: string }): number | undefined {
  switch (err.code) {
    case 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH':
    case 'WS_ERR_UNSUPPORTED_DATA_PAYLOAD_LENGTH':
      return 1009;
    case 'WS_ERR_TOO_MANY_BUFFERED_PARTS':
      return 1008;
    case 'WS_ERR_INVALID_UTF8':
      return 1007;
    default:
      return err.code?.startsWith('WS_ERR_') === true ? 1002 : undefined;
  }
}

/**
 * Stops parsing what the client sends on `socket`, once the server has sent its close
 * frame for protocol abuse (4003): its bytes are read and dropped, as `ws` itself does
 * once it has a close frame or refused a frame (it takes its `data` listener off and
 * resumes the socket), so the socket's end — the client answering the close — still
 * ends the connection. A flooder writing on through the close's grace (5 s) had the
 * node parse some 10 M acks or pongs it then ignored, holding every producer's POSTs
 * for seconds (a hostile-input newcomer's finding).
 */
export function dropClientBytes(socket: Socket): void {
  socket.removeAllListeners('data');
  socket.resume();
}
