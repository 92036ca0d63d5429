/**
 * The HTTP face of the error catalogue: every failure becomes `{"error": {"code",
 * "message"}}` with the catalogue's status (DESIGN.md §7), 503s (and the history budget's
 * 429s) carry `Retry-After`, 401s `WWW-Authenticate: Bearer`, and no stack or internal
 * detail reaches a client. Server faults (500) are logged at error with their stack; 503
 * UNAVAILABLE (an outage of Redis or another node, expected and retried) at warn with its
 * message and its cause's, no stack — but `/readyz`'s at debug: saying "not ready" is its
 * job; client faults at debug.
 */
import { maxHeaderSize, STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { bearerToken } from '../auth/api-token.js';
import { PixiuError, outageFields, type ErrorCode } from '../errors.js';
import { BODY_REQUIRED } from './validation.js';
import { notJsonTypeMessage } from './json-error.js';
import { LogThrottle, OUTAGE_LOG_INTERVAL_MS, thinnedFields } from '../log-throttle.js';
import { closesDeliberately, markClosing } from './closing-answers.js';
import { lingerOnClose, lingeringEnd } from './lingering-close.js';
import { hasClientMsgId, withRetryAdvice } from './retry-advice.js';
import { clientRequestId, REQUEST_ID_HEADER } from './request-ids.js';
import { requestFields } from './request-log.js';
import { clientIp } from './client-ip.js';

/**
 * A route's `config` as the error handler reads it (typed the way fastify documents).
 * `unavailableIsAnswer`: a 503 UNAVAILABLE is the route's answer, not a request that an
 * outage failed (`GET /readyz` says "not ready" so): logged at debug (`not ready`, with
 * its `reason`), never at warn.
 */
declare module 'fastify' {
  interface FastifyContextConfig {
    unavailableIsAnswer?: boolean;
  }
}

/** A whole body over its route's limit, before the handler names the limit ({@link withBodyLimit}). */
const BODY_TOO_LARGE = 'request body is over the size limit';
/** A Content-Type fastify cannot read, before the handler names it ({@link withBodyLimit}). */
const NOT_JSON_TYPE = 'the body must be application/json';

/** fastify's own error codes, mapped to the catalogue. */
const FASTIFY_CODES: Readonly<Record<string, { code: ErrorCode; message?: string }>> = {
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 'PAYLOAD_TOO_LARGE', message: BODY_TOO_LARGE },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { code: 'UNSUPPORTED_MEDIA_TYPE', message: NOT_JSON_TYPE },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { code: 'INVALID_REQUEST', message: 'Content-Length does not match the body' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { code: 'INVALID_REQUEST', message: BODY_REQUIRED },
  FST_ERR_CTP_INVALID_JSON_BODY: { code: 'INVALID_REQUEST', message: 'the body is not valid JSON' },
  // Raised by the router before any route runs; they reach a handler only through
  // fastify's `frameworkErrors` option (see frameworkErrorAnswerer).
  FST_ERR_BAD_URL: { code: 'INVALID_REQUEST', message: 'the URL is not validly percent-encoded' },
  FST_ERR_MAX_PARAM_LENGTH: { code: 'INVALID_REQUEST', message: 'a path parameter is too long' },
};

/** Turns any thrown value into a catalogue error (unknown faults become INTERNAL). */
export function toHttpError(err: unknown): PixiuError {
  if (err instanceof PixiuError) return err;
  const fe = err as Partial<FastifyError> & { validation?: unknown; validationContext?: string };
  if (fe.validation !== undefined) {
    return new PixiuError('INVALID_REQUEST', fe.message ?? 'invalid request', { cause: err });
  }
  const mapped = fe.code !== undefined ? FASTIFY_CODES[fe.code] : undefined;
  if (mapped) return new PixiuError(mapped.code, mapped.message ?? fe.message ?? mapped.code, { cause: err });
  // Node's request 'aborted' error: the connection closed (or was closed on a
  // malformed body, see clientErrorAnswerer) before the body had all arrived. A
  // client's doing, whatever route it hit, not a server fault.
  if (fe.code === 'ECONNRESET') {
    return new PixiuError('INVALID_REQUEST', 'the connection closed before the request body arrived', { cause: err });
  }
  if (err instanceof SyntaxError || (typeof fe.statusCode === 'number' && fe.statusCode === 400)) {
    return new PixiuError('INVALID_REQUEST', 'the body is not valid JSON', { cause: err });
  }
  if (typeof fe.statusCode === 'number' && fe.statusCode === 413) {
    return new PixiuError('PAYLOAD_TOO_LARGE', BODY_TOO_LARGE, { cause: err });
  }
  return new PixiuError('INTERNAL', 'internal error', { cause: err });
}

/**
 * Sends a catalogue error as the JSON error body. An error answered before the request's
 * body has all arrived (a refused token, found by a hook before the body is read) ends
 * the connection: Node would otherwise keep reading that body to keep the connection,
 * and a body that never comes would earn the same request a second answer, the 408 of
 * `PIXIU_REQUEST_TIMEOUT`. Its connection is marked (closing-answers.ts): the requests
 * after it — pipelined in the same write, or sent by the client before it read the
 * close — are not acted on. An error decided once the body has all arrived (an
 * asynchronous check, the `/v1/me` routes' JWT; a body-parsing error fastify would close
 * for) keeps the connection: the requests behind it may be dispatched already, and are
 * acted on and answered as usual; unless the close was decided as the request was handed
 * over (closing-answers.ts `closeAfter`).
 */
export function sendError(reply: FastifyReply, err: PixiuError): FastifyReply {
  if (err.retryAfterSeconds !== undefined) reply.header('retry-after', String(err.retryAfterSeconds));
  if (err.status === 401) reply.header('www-authenticate', bearerChallenge(reply.request.raw));
  const req = reply.request.raw;
  if (bodyPending(req)) {
    reply.header('connection', 'close');
    markClosing(req.socket);
    lingerOnClose(req.socket);
  } else if (reply.getHeader('connection') === 'close' && !closesDeliberately(req)) {
    // Not decided as Node handed the request over (closing-answers.ts `closeAfter`, which
    // marked the connection then): fastify's, added to any body-parsing error (a 415, a
    // 413) whether or not the body has all arrived. It has, so the requests behind it may
    // be dispatched already (after the /v1/me routes' asynchronous token check an ack
    // behind a 415 was applied, unanswered): the connection is kept instead.
    reply.removeHeader('connection');
  }
  return reply.code(err.status).type('application/json; charset=utf-8').send(err.toBody());
}

/**
 * The `WWW-Authenticate` of a 401: RFC 9110 §11.6.1 requires one, and every credential
 * Pixiu takes is a Bearer token (RFC 6750). `Bearer` alone when the request carried no
 * token; `Bearer error="invalid_token"` when it carried one that was refused (RFC 6750
 * §3.1): in `Authorization: Bearer`, or `?token=` on `/v1/connect`, the one route that
 * reads it (elsewhere it is no token: an unknown parameter, refused after the token check).
 */
function bearerChallenge(req: IncomingMessage): string {
  let given = bearerToken(req.headers.authorization) !== undefined;
  if (!given) {
    try {
      const url = new URL(req.url ?? '/', 'http://x');
      // An empty `token=` is no token (docs/protocol.md); of several, the route reads the first.
      given = url.pathname === '/v1/connect' && (url.searchParams.get('token') ?? '') !== '';
    } catch {
      // A URL that cannot be read carried no token Pixiu read.
    }
  }
  return given ? 'Bearer error="invalid_token"' : 'Bearer';
}

/**
 * True when the request has a body that has not all arrived. A request with neither
 * `Content-Length` nor `Transfer-Encoding` has none (RFC 9112 §6.3), though Node marks it
 * `complete` only after its handlers ran: a 404 or 401 of a GET keeps its connection.
 */
function bodyPending(req: IncomingMessage): boolean {
  if (req.complete) return false;
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * For fastify's `frameworkErrors` option: a malformed URL or an over-long path
 * parameter, found by the router before any hook or handler runs, answered with the
 * catalogue's body like every other error (fastify's own body is not Pixiu's), and
 * counted like every other error answer. Its request has no route context, so no hook
 * runs for it — request-ids.ts's `onSend` neither: its `X-Request-Id` is set here (walk29
 * F8: a 400 for `/v1/users/a%ZZ/messages` logged an id it did not answer).
 * @param onError called with the error (metrics)
 */
export function frameworkErrorAnswerer(onError?: (err: PixiuError, req: FastifyRequest) => void): (err: FastifyError, req: FastifyRequest, reply: FastifyReply) => void {
  return (err, req, reply) => {
    const answer = toHttpError(err);
    if (answer.status < 500) logRejected(req.log, answer, () => ({ ip: clientIp(req) }));
    onError?.(answer, req);
    void reply.header(REQUEST_ID_HEADER, req.id);
    void sendError(reply, answer);
  };
}

/**
 * For fastify's `clientErrorHandler` option: a request Node's HTTP parser refuses
 * before fastify sees it (a malformed request line, `Content-Length: abc`, both
 * `Content-Length` and `Transfer-Encoding`, bytes after the body that are not a
 * request, headers over the limit, a request too slow to arrive) is answered with the
 * catalogue's body too, written raw on the socket after the answers to the requests
 * before it (see `endAfterAnswers`), and the socket is then closed: after a
 * parse error the stream has no next request boundary (Node's 'clientError' event,
 * https://nodejs.org/api/http.html#event-clienterror). Closed with a lingering close
 * ({@link lingeringEnd}), within lingering-close.ts `LINGER_MS`: Node's server sockets are
 * half-open, and ending the server's side alone left a client that kept its own side
 * open (silent or trickling bytes) holding the socket, read, for as long as it liked
 * (a security tester's finding: 300 such connections after a 408 held 300 fds for
 * minutes, unauthenticated).
 * @param onError called with each error as it is answered (metrics), and the request it
 *   answers when it answers one (a timed-out or malformed body), not bytes after them
 */
export function clientErrorAnswerer(onError?: (err: PixiuError, req?: IncomingMessage) => void): (err: Error & { code?: string }, socket: HttpServerSocket) => void {
  return (err, socket) => {
    // A reset connection has nobody to answer; one answered already (the parser's
    // complaint at the end of a connection that timed out) gets no second answer.
    if (err.code === 'ECONNRESET' || socket.destroyed || socket.writableEnded || answeredRaw.has(socket)) return;
    const answer = err.code === 'HPE_HEADER_OVERFLOW'
      ? new PixiuError('HEADERS_TOO_LARGE', `the request line and headers are over ${maxHeaderSize} bytes`, { cause: err })
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? new PixiuError('REQUEST_TIMEOUT', 'the request did not arrive in time', { cause: err })
        : new PixiuError('INVALID_REQUEST', 'the request is not valid HTTP/1.1', { cause: err });
    const text = rawErrorAnswer(answer);
    const answerWith = (req: IncomingMessage | undefined): void => {
      onError?.(answer, req);
      answeredRaw.add(socket);
      if (socket.writable) lingeringEnd(socket, text);
      else socket.destroy();
    };
    // A request whose headers or body stopped arriving has its answer attached but not
    // begun, and it never will be: that answer is the 408.
    const current = socket._httpMessage;
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT' && current != null && !current.headersSent) answerWith(current.req);
    // Else after the answers of the requests before the bad bytes (endAfterAnswers) — up
    // to a request whose body broke off malformed (a chunk size that is not hex, chunk
    // data not followed by CRLF), at once or pipelined behind others: its handler waits
    // for a body that can never end, so this error is its answer.
    else endAfterAnswers(socket, answerWith);
  };
}

/**
 * `err` as a whole HTTP/1.1 answer to write raw on a socket Node's HTTP machinery no
 * longer answers on: its status, the catalogue's JSON body and `Connection: close`.
 * @param reqId said in `X-Request-Id` when given (a client's id, request-ids.ts `clientRequestId`)
 */
export function rawErrorAnswer(err: PixiuError, reqId?: string): string {
  const body = JSON.stringify(err.toBody());
  return `HTTP/1.1 ${err.status} ${STATUS_CODES[err.status] ?? ''}\r\n`
    + 'Content-Type: application/json; charset=utf-8\r\n'
    + (reqId === undefined ? '' : `X-Request-Id: ${reqId}\r\n`)
    + `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

/**
 * Sockets a client error was answered on, raw (see clientErrorAnswerer): the request
 * it answered then fails again as the socket closes (Node's 'aborted'), reaching the
 * error handler with nobody to answer; that is neither logged nor counted twice.
 */
const answeredRaw = new WeakSet<Socket>();

/** True when an answer to a request on `socket` was already written raw (a client error). */
export function answeredRawly(socket: Socket | null | undefined): boolean {
  return socket != null && answeredRaw.has(socket);
}

/**
 * For the HTTP server's 'checkExpectation' event: a request whose `Expect` header is not
 * `100-continue`, the only expectation HTTP defines (RFC 9110 §10.1.1), is answered 417
 * EXPECTATION_FAILED with the catalogue's body and the connection closed (its body, if
 * it has one, is not read). Without a listener Node answers a bare 417, no body; with
 * one, Node hands the request here instead of to fastify.
 * https://nodejs.org/api/http.html#event-checkexpectation
 * @param onError called with the error (metrics)
 */
export function expectationAnswerer(onError?: (err: PixiuError, req: IncomingMessage) => void): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const err = new PixiuError('EXPECTATION_FAILED', 'the Expect header asks for something other than 100-continue, '
      + 'the only expectation HTTP defines (RFC 9110 §10.1.1); send the request without it');
    onError?.(err, req);
    // It closes the connection: the requests pipelined after it are not acted on
    // (closing-answers.ts). The request's socket: a pipelined 417's response has none yet.
    markClosing(req.socket);
    // Its body is not read: a client still sending it gets the 417, not a reset.
    if (bodyPending(req)) lingerOnClose(req.socket);
    writeClosingAnswer(res, err);
  };
}

/**
 * Writes `err` as a JSON error answer that closes its connection, straight on Node's
 * `res` (for answers given outside fastify: the 417, the pipelining bound's 429), with
 * `Retry-After` when `err` carries one, as {@link sendError} gives it, and the client's
 * `X-Request-Id` when it sent one to take (request-ids.ts; such an answer has no fastify
 * request, nor an id of its own). The caller marks the connection closing
 * (closing-answers.ts) and lingers as its case needs.
 */
export function writeClosingAnswer(res: ServerResponse, err: PixiuError): void {
  const body = JSON.stringify(err.toBody());
  const reqId = clientRequestId(res.req);
  res.writeHead(err.status, {
    'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), connection: 'close',
    ...(err.retryAfterSeconds === undefined ? {} : { 'retry-after': String(err.retryAfterSeconds) }),
    ...(reqId === undefined ? {} : { [REQUEST_ID_HEADER]: reqId }),
  });
  res.end(body);
}

/**
 * A socket as Node's HTTP server keeps it: `_httpMessage`, Node's own (undocumented,
 * long-standing) link to the response it is writing, if any. Also what the upgrade
 * guard reads (src/gateway/upgrade-guard.ts).
 */
export type HttpServerSocket = Socket & { _httpMessage?: ServerResponse | null };

/**
 * Runs `fn` once no answer of an earlier request on `socket` is being written (at once
 * when none is); never when the socket is gone meanwhile. Pipelined requests are
 * answered in order, so what follows them (an error for bytes after them, an upgrade)
 * must wait for their answers.
 * @param stopAt an answer not to wait for (it will never be written): `fn` runs when
 *   it is the socket's current one, and gets it
 */
export function whenAnswersLeft(socket: HttpServerSocket, fn: (stoppedAt?: ServerResponse) => void, stopAt?: (res: ServerResponse) => boolean): void {
  if (socket.destroyed) return;
  const current = socket._httpMessage;
  if (current === undefined || current === null) {
    fn();
    return;
  }
  if (stopAt?.(current) === true) {
    fn(current);
    return;
  }
  // 'close': the answer is complete or its connection is gone. Node hands the socket
  // to the next pipelined answer in the same turn, hence the look again after it.
  current.once('close', () => setImmediate(() => whenAnswersLeft(socket, fn, stopAt)));
}

/**
 * Writes `text` and closes the socket once the answers of the requests parsed before
 * the bad bytes are written: requests pipelined in the same packet as trailing junk
 * were read and are being served, and their answers must reach the producer before
 * the error, not be cut off by it (a `400` for a message that was stored would make a
 * producer drop or resend it). The wait stops at an answer not begun whose request's
 * body has not all arrived: after a parse error it never will, so that request is the
 * one being answered.
 * @param answer writes the error and ends the socket; gets the request it answers, if any
 */
function endAfterAnswers(socket: HttpServerSocket, answer: (req: IncomingMessage | undefined) => void): void {
  whenAnswersLeft(socket, (stoppedAt) => answer(stoppedAt?.req),
    (res) => !res.headersSent && bodyPending(res.req));
}

/**
 * `err` or, when it is a whole body over the route's limit (fastify's own 413), the
 * same refusal naming that limit, in bytes and KiB or MiB, and the setting when it is
 * the app's (`PIXIU_MAX_BODY_BYTES`) rather than a route's own (`/v1/me/ack`, 4 KiB):
 * a producer sizing its batches needs the number. Likewise fastify's own 415 (a
 * Content-Type it cannot parse) names what was sent and what to send, as the content
 * type parsers' 415 does (src/api/json-error.ts `notJsonTypeMessage`).
 */
function withBodyLimit(err: PixiuError, req: FastifyRequest): PixiuError {
  if (err.code === 'UNSUPPORTED_MEDIA_TYPE' && err.message === NOT_JSON_TYPE) {
    return new PixiuError('UNSUPPORTED_MEDIA_TYPE', notJsonTypeMessage(req.headers['content-type']), { cause: err.cause });
  }
  if (err.code !== 'PAYLOAD_TOO_LARGE' || err.message !== BODY_TOO_LARGE) return err;
  const limit = req.routeOptions.bodyLimit;
  const setting = limit === req.server.initialConfig.bodyLimit ? 'PIXIU_MAX_BODY_BYTES' : 'this route\'s own limit';
  return new PixiuError('PAYLOAD_TOO_LARGE', `the request body is over the limit of ${limit} bytes (${binarySize(limit)}, ${setting})`, { cause: err.cause });
}

/** `8 MiB`, `4 KiB`, `1.5 MiB`, `100 bytes`: a size in its largest binary unit, to two decimals. */
export function binarySize(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${Number((bytes / (1024 * 1024)).toFixed(2))} MiB`;
  if (bytes >= 1024) return `${Number((bytes / 1024).toFixed(2))} KiB`;
  return `${bytes} bytes`;
}

/**
 * Logs a request refused for the client's fault, as README "Commands" says: one debug line,
 * `request rejected`, with its `code` and the answer's message in `reason` — not `msg`: pino
 * writes its message as `msg`, and a second key of that name is dropped by every JSON reader
 * (jq, JSON.parse keep the last). Every refusal of the client's doing logs it.
 * @param fields what names the request besides, read only when debug is on: the client's `ip` (client-ip.ts) where fastify has a request, a 409's key and message id (request-log.ts)
 */
export function logRejected(log: Pick<FastifyBaseLogger, 'debug'> & { isLevelEnabled?: (level: string) => boolean }, err: PixiuError, fields?: () => object): void {
  if (log.isLevelEnabled?.('debug') === false) return;
  log.debug({ code: err.code, reason: err.message, ...fields?.() }, 'request rejected');
}

/**
 * Installs the error and not-found handlers on an app.
 * @param onError called with each mapped error (metrics)
 * @param notFoundHint what a 404 of a method on a path adds to "no route METHOD PATH" (route-methods.ts)
 */
export function installErrorHandlers(
  app: FastifyInstance, onError?: (err: PixiuError, req: FastifyRequest) => void, notFoundHint?: (method: string, path: string) => string,
): void {
  const outages = new LogThrottle(OUTAGE_LOG_INTERVAL_MS);
  app.setErrorHandler((raw: unknown, req, reply) => {
    const err = withBodyLimit(toHttpError(raw), req);
    // Answered already, raw, as a client error (its body broke off malformed): this is
    // the request failing again as its socket closed, with nobody left to answer.
    if (answeredRawly(req.raw.socket)) return sendError(reply, err);
    if (err.code === 'UNAVAILABLE' && req.routeOptions.config.unavailableIsAnswer === true) {
      // `GET /readyz`: a 503 is what it is for (a node starting, Redis down), and probes
      // come every few seconds: not a warning per probe, nor a line of the outage
      // thinning below, which would leave a real request's 503 unlogged.
      req.log.debug({ reason: err.message }, 'not ready');
    } else if (err.code === 'UNAVAILABLE') {
      // Expected while Redis or another node is down, and answered 503 + Retry-After:
      // a warning with the reason, not an error with a stack (kept for INTERNAL, a bug);
      // one per OUTAGE_LOG_INTERVAL_MS, with how many 503s went unlogged before it.
      const left = outages.take();
      // Named by its method, route, client_msg_id and stored message (request-log.ts).
      if (left !== undefined) req.log.warn({ ...outageFields(err), ...requestFields(req), ...thinnedFields(left) }, 'request unavailable');
    } else if (err.status >= 500 && err.code !== 'NOT_IMPLEMENTED') {
      req.log.error({ err: err.cause ?? err, code: err.code, ...requestFields(req) }, 'request failed');
    } else logRejected(req.log, err, () => ({ ...(err.code === 'CONFLICT' ? requestFields(req) : {}), ip: clientIp(req) }));
    onError?.(err, req);
    return sendError(reply, withRetryAdvice(err, req.routeOptions.config.ingestRoute, hasClientMsgId(req.body)));
  });
  app.setNotFoundHandler((req, reply) => {
    // HEAD answers as GET would, headers (Content-Length) included (RFC 9110 §9.3.2).
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    const path = req.url.split('?')[0] ?? '';
    const err = new PixiuError('NOT_FOUND', `no route ${method} ${path}${notFoundHint?.(method, path) ?? ''}`);
    logRejected(req.log, err, () => ({ ip: clientIp(req) }));
    onError?.(err, req);
    return sendError(reply, err);
  });
}
