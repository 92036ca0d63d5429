/**
 * The CONNECT method (RFC 9110 §9.3.6: a tunnel through a proxy), which Pixiu does not
 * serve. Node hands a CONNECT request to the server's `connect` event, never to the
 * request handler, and with no listener destroys the connection: the client got no
 * answer, and a request pipelined ahead of it on the same connection was cut off with
 * it — unanswered, and a `POST /v1/messages` whose body had all arrived stored nothing
 * (a security tester's finding). Answered here as any other method on an unknown route
 * is (docs/api.md): 404 NOT_FOUND with the catalogue's body, after the answers of the
 * requests before it, then the connection is closed with a lingering close: what the
 * client still sends is read and dropped until its end, or lingering-close.ts `LINGER_MS` at most.
 * Node's HTTP server no longer tracks such a socket, so a client that kept its side
 * open held it — and the node's shutdown, which waits for every socket — for good (a
 * reviewer's finding on the first version, which only ended its own side).
 * An `X-Request-Id` the client sent is echoed, as by the 417 (it has no id of its own).
 * https://nodejs.org/api/http.html#event-connect
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { PixiuError } from '../errors.js';
import { clientRequestId } from './request-ids.js';
import { rawErrorAnswer, whenAnswersLeft, type HttpServerSocket } from './error-handler.js';
import { lingeringEnd } from './lingering-close.js';

/**
 * For the HTTP server's `connect` event: answers the CONNECT request 404 NOT_FOUND once
 * the answers of the requests before it are written, and closes the connection.
 * @param onError called with the error as it is answered (metrics)
 */
export function connectMethodAnswerer(onError?: (err: PixiuError, req: IncomingMessage) => void): (req: IncomingMessage, socket: Duplex) => void {
  return (req, socket) => {
    // Node took its own error listener off the socket as it handed it over.
    socket.on('error', () => socket.destroy());
    const err = new PixiuError('NOT_FOUND', `no route CONNECT ${req.url ?? ''}: this server is no proxy`);
    whenAnswersLeft(socket as HttpServerSocket, () => {
      onError?.(err, req);
      if (!socket.writable) {
        socket.destroy();
        return;
      }
      lingeringEnd(socket as Socket, rawErrorAnswer(err, clientRequestId(req)));
    });
  };
}
