/**
 * What one HTTP connection's pipelined requests may cost the node (docs/api.md, "The
 * OpenAPI document and what holds for every route"; docs/decisions.md "HTTP").
 *
 * Node's HTTP server stops reading a connection whose answers are not being taken only
 * after it has parsed the whole chunk it read (64 KiB: some 1,500 requests of 42 bytes),
 * and it hands every request in it to the app at once; the answers of pipelined requests
 * then wait in memory behind the first (RFC 9112 §9.3.2: in order). One connection that
 * wrote 20,000 `GET /v1/openapi.json` in one write and read nothing took the heap from
 * 29 MB to 981 MB, held the event loop for over 10 s, lapsed the node's store lease and
 * had producers refused 503 (a black-box tester's F1). Nothing Node offers bounds it
 * (`maxRequestsPerSocket` counts a connection's requests over its life and answers 503
 * past it, an answer that waits behind the rest too); no npm package does it either.
 *
 * {@link boundPipelining} takes the server's `request` listeners (fastify's handler) and
 * calls them only for a request the connection may still start. One that arrives while
 * {@link PIPELINE_BOUNDS}`.maxRequests` earlier requests of the same connection are in
 * progress (dispatched, their answer not yet handed to the kernel, Node's `finish`) is
 * refused, and the connection closed gracefully: the requests in progress run on and
 * their answers are written, in order (Node queues a pipelined answer behind the ones
 * before it, RFC 9112 §9.3.2); the refused one is answered 429 `RATE_LIMITED` with
 * `Connection: close` after them ({@link pipelinedPastBound}); and the connection is
 * then closed with a lingering close (lingering-close.ts `lingerOnClose`). From the
 * refusal on, the connection's bytes are no longer parsed: Node's HTTP parser is taken
 * off the socket, and what the client still sends is read and dropped unparsed
 * (drop-incoming.ts, up to `LINGER_MAX_BYTES`), so the refused request and every one
 * sent after it never reach the app — no hook, no handler: a `POST` past the bound is
 * not acted on — and cost nothing but the read (only those Node had already parsed from
 * the chunk it was reading, at most one chunk of 64 KiB, are built and dropped). A
 * producer so gets the answer of every request acted on, and knows the rest were not. A
 * refused connection whose client takes none of its answers' bytes for
 * {@link REFUSED_STALL_MS} while some wait to be written is destroyed with them (it is
 * not reading: the flood of a black-box tester's F1).
 *
 * A request that arrives while more than `maxUnreadBytes` of answers wait to be written
 * on its connection destroys the connection at once instead: its client is not reading,
 * so no answer, the refusal's included, would reach it. The requests already started
 * then run on with nobody to answer (a message may be stored, its 201 never sent, as
 * when a client's connection drops; an ingest request whose client is gone before its
 * write is dropped, src/api/abandoned-requests.ts). A client that reads its answers and
 * keeps fewer requests than the bound in flight never meets either bound.
 *
 * The same wrapper drops a request dispatched on a connection an answer will close or
 * closed (an early refusal, a 417, a draining node's last answer: closing-answers.ts),
 * whether parsed from the same read or from bytes sent after that answer went out: Node
 * writes that answer and ends the connection, so the request is never acted on and never
 * answered. And it tells whether a later request of a connection is in progress
 * ({@link laterInProgress}), for an answer that would close the connection under it.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { dropIncoming } from '../drop-incoming.js';
import { PixiuError } from '../errors.js';
import { LogThrottle, OUTAGE_LOG_INTERVAL_MS, thinnedFields } from '../log-throttle.js';
import type { Logger } from '../logger.js';
import { LINGER_MAX_BYTES, lingerOnClose } from './lingering-close.js';
import { writeClosingAnswer } from './error-handler.js';
import { isClosing, markClosing } from './closing-answers.js';
import { drainedSince, socketDrainMark } from '../gateway/backpressure.js';
// The bounds live in pipeline-bounds.ts (the OpenAPI words read them without this module's imports).
import { PIPELINE_BOUNDS, type PipelineBounds } from './pipeline-bounds.js';

/** Which bound a connection was closed for: too many requests in progress, or too many bytes of answers unread. */
export type PipelineRefusal = 'pipelined_requests' | 'unread_bytes';

/** What a connection closed for its pipelining had when its next request arrived. */
export interface PipelineClose {
  readonly reason: PipelineRefusal;
  /** Its requests in progress (the one refused not counted). */
  readonly requests: number;
  /** Bytes of its answers waiting to be written. */
  readonly unreadBytes: number;
  /**
   * The error the refused request is answered with, after the answers of those in
   * progress ({@link pipelinedPastBound}, for `pipelined_requests`); undefined when the
   * connection is destroyed unanswered (`unread_bytes`).
   */
  readonly answer: PixiuError | undefined;
  /** The request that met the bound. */
  readonly req: IncomingMessage;
}

/**
 * How long a connection refused for `pipelined_requests` may take none of its answers'
 * bytes, while some wait to be written, before it is destroyed with them, ms: its
 * client is not reading them. A client that reads takes some every round trip; and a
 * producer's answers (64 at most, a few hundred bytes each) fit in the socket's buffer
 * at once, so nothing waits. Short, because until then the connection holds its
 * answers and the requests Node had parsed with the refused one (a black-box tester's
 * F1 flood, never read, is gone within some 0.6 s). Looked at every fifth of it, so a
 * stall is cut within 1.2 times it.
 */
export const REFUSED_STALL_MS = 500;

/**
 * The answer of a request that arrives with `maxRequests` others of its connection in
 * progress: 429 `RATE_LIMITED`, sent after their answers with `Connection: close` and
 * `Retry-After: 0`: the requests may be sent again at once, on another connection (every
 * 429 carries a `Retry-After`: docs/api.md, the OpenAPI document marks it required).
 */
export function pipelinedPastBound(maxRequests: number): PixiuError {
  return new PixiuError('RATE_LIMITED', `this connection has ${maxRequests} requests in progress (pipelined, their answers not all `
    + `written), the most it takes: this request and every one sent after it on the connection were not acted on, and the `
    + `connection closes after this answer. Send them again on another connection, with fewer than ${maxRequests} in flight`,
  { retryAfterSeconds: 0 });
}

/**
 * Each connection's requests in progress, in the order they arrived (their answers go out
 * in that order): an entry made at its first request, deleted by its `close`.
 */
const inProgress = new WeakMap<Socket, ServerResponse[]>();

/**
 * Whether a request dispatched after `res`'s on its connection is still in progress
 * (dispatched, its answer not yet all handed to the kernel): its answer goes out after
 * `res`'s (RFC 9112 §9.3.2), so an answer that is to end the connection leaves the close
 * to it (shutdown.ts: Node ends the connection after an answer with `Connection: close`,
 * and the answers queued behind it would never be written). False for a response this
 * module never dispatched (one it refused itself, or on a connection already closed).
 */
export function laterInProgress(res: ServerResponse): boolean {
  const queue = inProgress.get(res.req.socket);
  if (queue === undefined) return false;
  const at = queue.indexOf(res);
  return at >= 0 && at < queue.length - 1;
}

/** A response finished (`this`): its request is no longer in progress. Shared by all responses, no closure. */
function answered(this: ServerResponse): void {
  const queue = inProgress.get(this.req.socket);
  if (queue === undefined) return;
  const at = queue.indexOf(this);
  if (at >= 0) queue.splice(at, 1);
}

/** A connection closed (`this`): nothing of it is in progress any more. */
function forget(this: Socket): void {
  inProgress.delete(this);
}

/**
 * Bytes of answers waiting on `socket`: in its write buffer (what the answer being
 * written gave it and the kernel has not taken), and in the answers queued behind
 * that one, which Node keeps until their turn (a queued response has no socket: its
 * `writableLength` is what it holds).
 */
function unreadBytes(socket: Socket, queue: readonly ServerResponse[]): number {
  let bytes = socket.writableLength;
  for (const res of queue) if (res.socket !== socket) bytes += res.writableLength;
  return bytes;
}

/**
 * Refuses `req` for `pipelined_requests` and closes its connection gracefully (see the
 * module's doc): Node's HTTP parser is taken off the socket, what the client still
 * sends is read and dropped, `res` is answered `answer` with `Connection: close` (Node
 * writes it after the answers queued before it, then calls the socket's `destroySoon`,
 * made a lingering close here), and a client that stops taking its answers is cut.
 * The socket's 'data' listeners are then Node's parser's own (`socketOnData`,
 * lib/_http_server.js), the only ones an HTTP connection still parsing requests has;
 * adding the drop's listener makes Node stop feeding the parser from the socket's
 * handle (its `unconsume`), and taking them off leaves the bytes to the drop alone.
 * The lingering close's drop, at the end, goes on with this one (drop-incoming.ts):
 * its byte count runs from the refusal, and it adds only the time limit.
 */
function refuse(socket: Socket, res: ServerResponse, answer: PixiuError): void {
  markClosing(socket);
  const parsers = socket.listeners('data') as Array<(chunk: Buffer) => void>;
  dropIncoming(socket, { maxBytes: LINGER_MAX_BYTES });
  for (const parser of parsers) socket.removeListener('data', parser);
  lingerOnClose(socket);
  destroyWhenStalled(socket);
  writeClosingAnswer(res, answer);
}

/**
 * Destroys `socket` once its client took none of the bytes written to it for
 * {@link REFUSED_STALL_MS} while some wait: no write done and no more of the one in
 * progress taken by the kernel (gateway/backpressure.ts `socketDrainMark`, `drainedSince`,
 * the measure a paused WebSocket is judged by: a slow reader taking a large write bit
 * by bit is no stall). A node slow to answer, with nothing waiting, is no stall.
 */
function destroyWhenStalled(socket: Socket): void {
  let mark = socketDrainMark(socket);
  let since = performance.now();
  const timer = setInterval(() => {
    const now = socketDrainMark(socket);
    if (drainedSince(mark, now) || socket.writableLength === 0) since = performance.now();
    else if (performance.now() - since >= REFUSED_STALL_MS) socket.destroy();
    mark = now;
  }, REFUSED_STALL_MS / 5);
  timer.unref();
  socket.once('close', () => clearInterval(timer));
}

/**
 * Installs the bounds on `server`: its `request` listeners so far (fastify's handler;
 * call this right after fastify made the server, before anything else listens) are
 * called only for the requests a connection may start (see the module's doc). A
 * request Node parsed on a connection already refused or destroyed (the rest of the
 * chunk read with the request that met the bound) is dropped: never dispatched, never
 * answered. Requests Node hands to other events (an upgrade, CONNECT, an Expect other
 * than 100-continue) are not counted; a `checkContinue` listener that emits `request` is.
 * @param onClose told each connection closed for a bound, before its refusal is answered
 *   or it is destroyed (a metric, a log line)
 * @throws Error when `server` has no `request` listener yet
 */
export function boundPipelining(server: Server, onClose: (close: PipelineClose) => void, bounds: PipelineBounds = PIPELINE_BOUNDS): void {
  const handlers = server.listeners('request') as Array<(req: IncomingMessage, res: ServerResponse) => void>;
  // Installed before fastify's handler is there, it would answer nothing, ever.
  if (handlers.length === 0) throw new Error('boundPipelining: the server has no request listener to call yet');
  server.removeAllListeners('request');
  server.on('request', function (this: Server, req: IncomingMessage, res: ServerResponse) {
    const socket = req.socket;
    // Behind an answer that closes the connection (closing-answers.ts): never acted on, never answered.
    if (socket.destroyed || isClosing(socket)) return;
    let queue = inProgress.get(socket);
    if (queue === undefined) {
      queue = [];
      inProgress.set(socket, queue);
      socket.on('close', forget);
    } else if (queue.length > 0) {
      // Only a pipelined request (one arriving with another in progress) can meet a bound.
      // The bytes first: a client not reading would never see a refusal's answer either.
      const bytes = unreadBytes(socket, queue);
      if (bytes > bounds.maxUnreadBytes) {
        onClose({ reason: 'unread_bytes', requests: queue.length, unreadBytes: bytes, answer: undefined, req });
        socket.destroy();
        return;
      }
      if (queue.length >= bounds.maxRequests) {
        const answer = pipelinedPastBound(bounds.maxRequests);
        onClose({ reason: 'pipelined_requests', requests: queue.length, unreadBytes: bytes, answer, req });
        refuse(socket, res, answer);
        return;
      }
    }
    queue.push(res);
    // Node emits a response's `finish` at most once: `on`, not `once` and its wrapper.
    res.on('finish', answered);
    for (const handler of handlers) handler.call(this, req, res);
  });
}

/** The info line of a connection closed for its pipelining. */
export const PIPELINE_CLOSE_LINE = 'http connection closed: a request pipelined past a bound (too many in progress, or too many bytes of answers unread)';

/**
 * What {@link boundPipelining} tells of each connection it closes, for the node: counted
 * (`count`, the metric), and logged at info (client behaviour, not a fault of the node)
 * with the figures and the bound met, thinned to one line per
 * {@link OUTAGE_LOG_INTERVAL_MS} carrying `notLogged` (log-throttle.ts), since a client
 * may open connection after connection.
 */
export function reportPipelineCloses(logger: Logger, count: (reason: PipelineRefusal) => void, bounds: PipelineBounds = PIPELINE_BOUNDS): (close: PipelineClose) => void {
  const throttle = new LogThrottle(OUTAGE_LOG_INTERVAL_MS);
  return (close) => {
    count(close.reason);
    const left = throttle.take();
    const { reason, requests, unreadBytes: bytes } = close;
    if (left !== undefined) logger.info({ reason, requests, unreadBytes: bytes, ...bounds, ...thinnedFields(left) }, PIPELINE_CLOSE_LINE);
  };
}
