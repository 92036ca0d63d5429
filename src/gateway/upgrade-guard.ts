/**
 * Every socket that arrives through Node's `upgrade` event (any request with
 * `Connection: Upgrade` and an `Upgrade` header, whatever its path, method or
 * protocol) leaves Node's HTTP machinery for good: Node no longer reads from it, never
 * closes it, and `server.close()` waits for it. @fastify/websocket routes it through
 * fastify on a ServerResponse of its own, so a route that does not upgrade (an unknown
 * path, `POST /v1/connect`, `GET /healthz` with `Upgrade: h2c`, a refused handshake)
 * answers normally, and then nothing ever closes the socket: it stayed half-closed
 * (CLOSE-WAIT) after the client left, and SIGTERM waited for it forever.
 *
 * {@link guardUpgrades} closes such a socket once its HTTP answer is written (the answer
 * says `Connection: close`), and on shutdown destroys whatever upgrade sockets (and
 * HTTP connections) are still open once the grace period is over, logging at warn how
 * many requests that cut unanswered: their clients see the connection close, and only
 * the log says why (an ops tester's finding).
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { whenAnswersLeft, type HttpServerSocket } from '../api/error-handler.js';
import { isUpgrade } from '../api/upgrade-request.js';
import { PixiuError } from '../errors.js';
import type { Logger } from '../logger.js';
import { countRequestsInFlight } from './requests-in-flight.js';

/**
 * How long shutdown lets the remaining sockets finish (an HTTP answer being written, a
 * WebSocket close handshake already started by the gateway) before destroying them.
 */
export const SHUTDOWN_GRACE_MS = 5_000;

type UpgradeListener = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

/** What {@link guardUpgrades} exposes. */
export interface UpgradeGuard {
  /**
   * Upgrade sockets open now, whatever their path: each from its request until the socket
   * closes — a handshake in progress, an open WebSocket, a refused handshake or another
   * path's upgrade request (`Upgrade: h2c`) until its answer is out and its socket
   * closed. Each holds a file descriptor: this is what `PIXIU_MAX_CONNECTIONS` bounds
   * (connection-bound.ts, connect-route.ts).
   */
  readonly open: number;
}

/**
 * Installs the guard on `app.server`. Call right after registering @fastify/websocket:
 * its `upgrade` listener must run first, so the response it made is on the socket.
 * @param logger where the requests cut by the end of the shutdown grace are logged
 * @param graceMs shutdown grace before remaining sockets are destroyed
 */
export function guardUpgrades(app: FastifyInstance, logger: Logger, graceMs = SHUTDOWN_GRACE_MS): UpgradeGuard {
  const sockets = new Set<Socket>();
  const server = app.server;
  // HTTP requests not answered yet, for the warn line at the end of the grace.
  const inFlight = countRequestsInFlight(server);

  const onUpgrade = (_req: unknown, socket: HttpServerSocket): void => {
    if (socket.destroyed) return;
    const res = socket._httpMessage;
    // @fastify/websocket assigned its response to the socket (a synchronous step of
    // its listener); without one there is nobody to answer: nothing to keep open for.
    if (!res) {
      socket.destroy();
      return;
    }
    const close = (): void => { socket.destroySoon(); };
    // A WebSocket is answered 101 on the socket itself (the reply is hijacked): the
    // response never finishes, and `ws` owns the socket from then on. `ws` closes the
    // socket itself after a refusal it writes (a bad Sec-WebSocket-Key, …).
    if (res.writableFinished) close();
    else res.once('finish', close);
  };
  // Node emits `upgrade` as soon as it has parsed the request, also when the request
  // came pipelined behind others whose answers are still being written: their
  // ServerResponse then holds the socket, @fastify/websocket cannot give the upgrade
  // request one of its own (ERR_HTTP_SOCKET_ASSIGNED, logged), and the request went
  // unanswered. The listeners registered before the guard (the plugin's) are therefore
  // called once the answers ahead have left.
  const earlier = server.listeners('upgrade') as UpgradeListener[];
  server.removeAllListeners('upgrade');
  // Separate functions, not closures of the listener: a closure that lives as long as
  // the socket (its close listener) would keep the listener's whole scope, the request
  // and its head included, for the life of every WebSocket (+1.5 KiB per idle connection).
  // One close listener for every socket (`this` is the socket closing), added with `on`:
  // a socket closes once, and `once` wraps each in a bound function of its own with its
  // state, ~200 bytes per idle connection with a closure of its own (bench/README.md).
  const untrack = function (this: Socket): void {
    sockets.delete(this);
  };
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.on('close', untrack);
  };
  const dispatch = (req: IncomingMessage, socket: HttpServerSocket, head: Buffer): void => {
    for (const listener of earlier) listener.call(server, req, socket, head);
    onUpgrade(req, socket);
  };
  // Set by the preClose hook below: a late upgrade request has nobody to answer it.
  let closing = false;
  server.on('upgrade', (req: IncomingMessage, socket: HttpServerSocket, head: Buffer) => {
    if (closing) {
      socket.destroy();
      return;
    }
    track(socket);
    whenAnswersLeft(socket, () => (closing ? socket.destroy() : dispatch(req, socket, head)));
  });
  // The answer ends the connection: nothing reads from an upgrade socket any more, so a
  // following request on it could never be answered. (Node sets `req.upgrade` on every
  // request it hands to the `upgrade` event.) A hook, as the not-found handler answers
  // before the listener above can reach the response.
  // Node does not read the body of such a request either (it is the upgraded stream's
  // first bytes): a POST with `Upgrade: h2c` (as `curl --http2` sends on http://) would
  // fail as a body shorter than its Content-Length. It is refused for what it is.
  app.addHook('onRequest', (req, reply, done) => {
    if (!isUpgrade(req)) {
      done();
      return;
    }
    // (Its answer says `Connection: close`: the app's onRequest hook checking the request
    // line and headers (src/api/request-checks.ts) sets it, ahead of the token checks that
    // may answer before this hook runs.)
    const length = req.headers['content-length'];
    if (req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')) {
      done(new PixiuError('INVALID_REQUEST', 'a request with a body cannot ask for a protocol upgrade (Connection: Upgrade, e.g. h2c): send it without one'));
      return;
    }
    done();
  });

  // After the gateway has closed the WebSockets (1001) and fastify refuses new requests:
  // what is still open after the grace period (a client that never answers the close
  // handshake, a request stuck in flight) is destroyed, so `server.close()` completes.
  // From here a late upgrade request is destroyed at once (`closing`): the plugin
  // stops taking them at this point too (its own preClose removes its listener, which
  // the guard calls).
  app.addHook('preClose', (done) => {
    closing = true;
    const timer = setTimeout(() => {
      // A request still in flight now is cut unanswered (a body still arriving, a
      // handler waiting on Redis): its client must send it again. Upgrade sockets left
      // are WebSockets that did not answer the close (1001) and refused upgrades whose
      // answer was not taken; nothing is lost with them.
      if (inFlight.count > 0) {
        logger.warn({ requests: inFlight.count, upgradeSockets: sockets.size, graceMs },
          'shutdown grace period over: requests still in flight are cut unanswered (their clients see the connection close and must send them again)');
      }
      for (const socket of sockets) socket.destroy();
      server.closeAllConnections();
    }, graceMs);
    timer.unref();
    server.once('close', () => clearTimeout(timer));
    done();
  });

  return {
    get open() { return sockets.size; },
  };
}
