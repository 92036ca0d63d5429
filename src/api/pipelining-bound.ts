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
 * calls them only for a request the connection may still start: one that arrives while
 * {@link PIPELINE_BOUNDS}`.maxRequests` earlier requests of the same connection are in
 * progress (dispatched, their answer not yet handed to the kernel, Node's `finish`), or
 * while more than `maxUnreadBytes` of answers wait to be written on it, destroys the
 * connection instead. The request that meets the bound, and every one parsed after it,
 * never reaches the app: no hook, no handler — a pipelined `POST` past the bound is not
 * acted on. The requests already started run on with nobody to answer (a message may be
 * stored, its 201 never sent, as when a client's connection drops; an ingest request
 * whose client is gone before its write is dropped, src/api/abandoned-requests.ts). A
 * client that reads its answers and keeps fewer requests than the bound in flight never
 * meets it.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { LogThrottle, OUTAGE_LOG_INTERVAL_MS, thinnedFields } from '../log-throttle.js';
import type { Logger } from '../logger.js';

/** The bounds of one connection's pipelining. */
export interface PipelineBounds {
  /**
   * Requests of one connection in progress at once: dispatched to the app, their answer
   * not yet all handed to the kernel. A request arriving with this many in progress
   * closes the connection.
   */
  readonly maxRequests: number;
  /**
   * Bytes of answers waiting to be written on one connection (in the socket's buffer,
   * and those queued behind the answer being written): a request arriving with more
   * waiting closes the connection.
   */
  readonly maxUnreadBytes: number;
}

/**
 * The node's bounds: 64 requests, 16 MiB. 64 is several times what a pipelining client
 * keeps in flight (undici's `pipelining` is 1 by default, load tools such as autocannon
 * and wrk are usually run 10 – 16 deep; browsers and curl do not pipeline),
 * and costs the node at most 64 answers' work per connection before it is closed
 * (docs/decisions.md "HTTP" has the measurement). 16 MiB is twice what one user's
 * history answers may hold (history-budget.ts `HISTORY_BYTES_PER_USER`), so a slow
 * reader asking for pages one after the other, or a producer's batch answers, stays
 * far below it.
 */
export const PIPELINE_BOUNDS: PipelineBounds = Object.freeze({ maxRequests: 64, maxUnreadBytes: 16 * 1024 * 1024 });

/** Which bound a connection was closed for: too many requests in progress, or too many bytes of answers unread. */
export type PipelineRefusal = 'pipelined_requests' | 'unread_bytes';

/** What a connection closed for its pipelining had when its next request arrived. */
export interface PipelineClose {
  readonly reason: PipelineRefusal;
  /** Its requests in progress (the one refused not counted). */
  readonly requests: number;
  /** Bytes of its answers waiting to be written. */
  readonly unreadBytes: number;
}

/**
 * Each connection's requests in progress, in the order they arrived (their answers go out
 * in that order): an entry made at its first request, deleted by its `close`.
 */
const inProgress = new WeakMap<Socket, ServerResponse[]>();

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
 * Installs the bounds on `server`: its `request` listeners so far (fastify's handler;
 * call this right after fastify made the server, before anything else listens) are
 * called only for the requests a connection may start (see the module's doc). A
 * request Node parsed on a connection already destroyed (the rest of the chunk read
 * with the request that met the bound) is dropped too: nobody could answer it.
 * Requests Node hands to other events (an upgrade, CONNECT, an Expect other than
 * 100-continue) are not counted; a `checkContinue` listener that emits `request` is.
 * @param onClose told each connection closed for a bound, before it is destroyed (a metric, a log line)
 * @throws Error when `server` has no `request` listener yet
 */
export function boundPipelining(server: Server, onClose: (close: PipelineClose) => void, bounds: PipelineBounds = PIPELINE_BOUNDS): void {
  const handlers = server.listeners('request') as Array<(req: IncomingMessage, res: ServerResponse) => void>;
  // Installed before fastify's handler is there, it would answer nothing, ever.
  if (handlers.length === 0) throw new Error('boundPipelining: the server has no request listener to call yet');
  server.removeAllListeners('request');
  server.on('request', function (this: Server, req: IncomingMessage, res: ServerResponse) {
    const socket = req.socket;
    if (socket.destroyed) return;
    let queue = inProgress.get(socket);
    if (queue === undefined) {
      queue = [];
      inProgress.set(socket, queue);
      socket.on('close', forget);
    } else if (queue.length > 0) {
      // Only a pipelined request (one arriving with another in progress) can meet a bound.
      const bytes = unreadBytes(socket, queue);
      const reason = queue.length >= bounds.maxRequests ? 'pipelined_requests' : bytes > bounds.maxUnreadBytes ? 'unread_bytes' : undefined;
      if (reason !== undefined) {
        onClose({ reason, requests: queue.length, unreadBytes: bytes });
        socket.destroy();
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
    if (left !== undefined) logger.info({ ...close, ...bounds, ...thinnedFields(left) }, PIPELINE_CLOSE_LINE);
  };
}
