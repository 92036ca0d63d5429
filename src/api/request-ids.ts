/**
 * Request ids (docs/api.md "Errors", README "Logging"): every request the app handles has
 * one, the `reqId` of its log lines, and every answer says it in `X-Request-Id`. A client
 * that sends its own `X-Request-Id` — 1 to {@link MAX_REQUEST_ID_LENGTH} visible ASCII
 * characters, a backend's trace id — has it taken as the request's id, so an operator
 * finds that request's lines by the id the backend logged (walk26 L1: a retry could not
 * be tied to its first attempt). Any other value is not taken (a new one is made, as for
 * none): a header of control characters, spaces or kilobytes never reaches a log line,
 * nor one in the node's own form, `req-<n>`.
 *
 * fastify's own `requestIdHeader` takes the header as it comes, whatever it holds; its
 * `genReqId`, given here, is what reads it, bounded.
 */
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';

/** The header a request's id is read from and answered in. */
export const REQUEST_ID_HEADER = 'x-request-id';

/** The longest client request id taken, characters. */
export const MAX_REQUEST_ID_LENGTH = 128;

/** Visible ASCII (RFC 5234 VCHAR), 1 to {@link MAX_REQUEST_ID_LENGTH} characters. */
const ACCEPTED = new RegExp(`^[\\x21-\\x7e]{1,${MAX_REQUEST_ID_LENGTH}}$`);

/**
 * The form of the node's own ids (`req-<n>`, base 36): a client's in that form is not
 * taken, so that an id of that form in a log is always the node's (walk29 F3: a client's
 * `req-1` and the node's own mixed under one `reqId`).
 */
const NODE_MADE = /^req-[0-9a-z]+$/;

/** The `X-Request-Id` of `req` when it is one to take as its id; else undefined. */
export function clientRequestId(req: IncomingMessage): string | undefined {
  const sent = req.headers[REQUEST_ID_HEADER];
  return typeof sent === 'string' && ACCEPTED.test(sent) && !NODE_MADE.test(sent) ? sent : undefined;
}

/**
 * fastify's `genReqId`: the client's {@link clientRequestId}, else `req-<n>` (base 36,
 * as fastify's own ids), counted per generator, wrapping at 2^31 as fastify's do.
 */
export function requestIdGenerator(): (req: IncomingMessage) => string {
  let next = 0;
  return (req) => {
    const sent = clientRequestId(req);
    if (sent !== undefined) return sent;
    next = (next + 1) & 0x7fffffff;
    return `req-${next.toString(36)}`;
  };
}

/**
 * Adds the hook that says each answer's request id in `X-Request-Id`: `onSend`, which
 * every answer sent through fastify passes — a route's, an error's (a 413 refused before
 * the body is parsed, a 503 of a draining node refused in the first `onRequest` hook), an
 * unknown route's 404. Not the router's own 400 (a path not validly percent-encoded),
 * which runs no hook: error-handler.ts `frameworkErrorAnswerer` says its id; nor the
 * answers written outside fastify (the 417, the pipelining bound's 429: error-handler.ts
 * `writeClosingAnswer` says theirs; a CONNECT's 404, connect-method.ts), nor those to
 * bytes Node's HTTP parser refuses, which have no request.
 */
export function installRequestIds(app: FastifyInstance): void {
  app.addHook('onSend', (req, reply, payload, done) => {
    void reply.header(REQUEST_ID_HEADER, req.id);
    done(null, payload);
  });
}
