/**
 * What a connection closes with when `ws`'s receiver refuses a client frame: the
 * receiver's error codes mapped to the close codes of RFC 6455 §7.4.1, so that the
 * close is counted and logged as what the server decided (ws-connection.ts); and how it
 * stops parsing a client it closed for abuse.
 */
import type { Socket } from 'node:net';
import { dropIncoming, type DropLimits } from '../drop-incoming.js';

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
 * The socket 'data' listeners that feed `ws`'s receiver, the frame parser: those a
 * socket has when `ws` hands the connection over ({@link noteFrameParsers}). In ws 8
 * that is one function for every socket (its `socketOnData`), which `ws` takes off by
 * identity itself once it has a close frame; ws exports no way to name it, hence this.
 */
const frameParsers = new WeakSet<Function>();

/**
 * Notes the 'data' listeners `socket` has as it is handed over by `ws` (its
 * 'connection' event, before anything else listens) as those that parse frames: they
 * are `ws`'s alone then, as Node's HTTP server took its parser's off at the upgrade
 * (lib/_http_server.js, `onParserExecuteCommon`). A listener added after is not one.
 */
export function noteFrameParsers(socket: Socket): void {
  for (const listener of socket.listeners('data')) frameParsers.add(listener);
}

/**
 * Stops parsing what the client sends on `socket`, once the server has sent its close
 * frame for protocol abuse (4003): `ws`'s receiver is taken off (only it: another
 * 'data' listener stays) and the bytes are read and dropped, as `ws` itself does once
 * it has a close frame or refused a frame, so the socket's end — the client answering
 * the close — still ends the connection. Within `limits` (drop-incoming.ts): past
 * `limits.maxBytes` or `limits.ms` the socket is destroyed. A flooder writing on through
 * the close's grace (5 s) had the node parse some 10 M acks or pongs it then ignored,
 * holding every producer's POSTs for seconds (a hostile-input newcomer's finding); and
 * once they were dropped unparsed but without a cap, the node still read 850 MB of them
 * in the grace on loopback (the cap: frame-limits.ts `abuseDropBytes`).
 */
export function dropClientBytes(socket: Socket, limits: DropLimits): void {
  for (const listener of socket.listeners('data')) {
    if (frameParsers.has(listener)) socket.removeListener('data', listener as (chunk: Buffer) => void);
  }
  dropIncoming(socket, limits);
}
