/**
 * Answers that close their connection, and connections such an answer will close: what
 * pipelining-bound.ts needs to leave the requests pipelined after such an answer not
 * acted on (docs/api.md: a client's requests after a closing refusal are not acted on;
 * a message pipelined behind a 401 was stored and never answered, a black-box tester's
 * walk11 A). Marked by those who decide the close: error-handler.ts `sendError` (an early
 * refusal, `Connection: close`) and `expectationAnswerer` (the 417), pipelining-bound.ts for its 429;
 * pipelining-bound.ts drops a request dispatched after one.
 * Node writes a `writeHead`'s headers without keeping them (`getHeader` cannot tell),
 * hence marks of our own.
 */
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

const answers = new WeakSet<ServerResponse>();
const sockets = new WeakSet<Socket>();

/** Marks `res` as an answer that closes its connection (sent with `Connection: close`). */
export function markClosingAnswer(res: ServerResponse): void {
  answers.add(res);
}

/** Whether `res` was marked by {@link markClosingAnswer}. */
export function closesConnection(res: ServerResponse): boolean {
  return answers.has(res);
}

/**
 * Marks `socket` as closed by an answer decided as Node parsed its request, before any
 * later request of the connection was parsed (the 417, the bound's 429): every request
 * parsed after it is dropped.
 */
export function markClosing(socket: Socket | null | undefined): void {
  if (socket) sockets.add(socket);
}

/** Whether `socket` was marked by {@link markClosing}. */
export function isClosing(socket: Socket): boolean {
  return sockets.has(socket);
}
