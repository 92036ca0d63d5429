/**
 * Connections an answer will close, marked as the answer is decided: what
 * pipelining-bound.ts needs to leave the requests after such an answer not acted on
 * (docs/api.md: a client's requests after a closing refusal are not acted on; a message
 * pipelined behind a 401 was stored and never answered, a black-box tester's walk11 A).
 * Marked by those who decide the close: {@link closeAfter} (the first `onRequest` hook's
 * refusals, request-checks.ts), error-handler.ts `sendError` (an error answered before
 * its request's body had all arrived, `Connection: close`), `expectationAnswerer`
 * (the 417), pipelining-bound.ts (its 429) and shutdown.ts (a draining node's answer to
 * the last request in progress on its connection); pipelining-bound.ts drops every
 * request dispatched on a marked connection.
 *
 * Each of these closes is decided before any later request of the connection was parsed
 * (Node's parser reads the next request only once a body has all arrived, so a request
 * whose body is pending has none parsed behind it; the 417 and the 429 are decided as
 * Node hands their request over; a draining node's close only when no later request of
 * the connection is in progress: Node hands a request over as it parses its head), so
 * the mark reaches every request behind the answer: those parsed from the same read,
 * and those parsed from what the client sends later, before it read the close (while
 * the answer waits behind a slow one, or after it went out: Node's parser still reads
 * during the lingering close, lingering-close.ts; a `POST /v1/me/ack` sent so moved the
 * device's cursor, unanswered).
 * Node writes a `writeHead`'s headers without keeping them (`getHeader` cannot tell),
 * hence a mark of our own.
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyReply } from 'fastify';
import { isUpgrade } from './upgrade-request.js';

const sockets = new WeakSet<Socket>();
const deliberate = new WeakSet<IncomingMessage>();

/**
 * Makes `reply` close its connection after it (`Connection: close`), decided in the first
 * `onRequest` hook, as Node hands its request over (request-checks.ts: an upgrade, a
 * version that is not HTTP/1.x, a missing or repeated Host, a transfer coding not taken),
 * and marks the connection ({@link markClosing}) at once. An upgrade's socket is not
 * marked: Node parses no request on it after this one, so the mark would never be read,
 * and it would be held for the life of every WebSocket (~40 bytes of heap each). An error
 * answer so closing keeps its close (error-handler.ts `sendError`); the close fastify adds
 * to every body-parsing error is not one of them.
 */
export function closeAfter(reply: FastifyReply): void {
  void reply.header('connection', 'close');
  deliberate.add(reply.request.raw);
  if (!isUpgrade(reply.request)) markClosing(reply.request.raw.socket);
}

/**
 * Whether `req`'s answer was made to close its connection by {@link closeAfter} (not
 * whether its socket is marked: an earlier answer on the connection may have marked it).
 */
export function closesDeliberately(req: IncomingMessage): boolean {
  return deliberate.has(req);
}

/**
 * Marks `socket` as closed by an answer decided before any later request of the
 * connection was parsed: every request dispatched on it from now on is dropped.
 * Give the request's socket (`req.socket`): a pipelined response has none until its turn.
 */
export function markClosing(socket: Socket | null | undefined): void {
  if (socket) sockets.add(socket);
}

/** Whether `socket` was marked by {@link markClosing}. */
export function isClosing(socket: Socket): boolean {
  return sockets.has(socket);
}
