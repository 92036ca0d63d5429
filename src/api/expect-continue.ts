/**
 * `Expect: 100-continue` (RFC 9110 §10.1.1): the interim 100 is held back when the
 * request will be refused from its headers, so that its final answer is the first thing
 * the client hears. Node answers 100 as soon as the headers arrive unless something
 * listens for 'checkContinue', so a request then refused from its headers (no token, a
 * content type other than JSON, a length over the limit) was first invited to send a
 * body that would never be read: `100 Continue`, then `401` (a fresh tester's finding).
 * Every other request gets its 100 before anything reads its body: one held back from a
 * body that is then read would wait for it until the request timeout (408).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { bodyFraming, declaresJson, takesBody } from './validation.js';

/** Node's own test of the header (lib/_http_server.js `continueExpression`). */
const CONTINUE = /(?:^|\W)100-continue(?:$|\W)/i;

/** Requests sent their 100 already: an interim answer leaves `headersSent` false. */
const continued = new WeakSet<object>();

/**
 * Makes `app` answer `100 Continue` from its `preParsing` hook, after the `onRequest`
 * hooks (the token, the content coding and charset: a refusal there is the only answer),
 * unless the body will be refused from the headers without being read
 * ({@link refusedUnread}). Only HTTP/1.1 requests expect it: Node ignores the header on
 * HTTP/1.0, as the RFC says a server must.
 */
export function installContinue(app: FastifyInstance): void {
  app.server.on('checkContinue', (req, res) => app.server.emit('request', req, res));
  app.addHook('preParsing', (req, reply, payload, done) => {
    // The header first: almost no request carries it.
    if (req.headers.expect !== undefined && !refusedUnread(req)) continueIfExpected(req, reply);
    done(null, payload);
  });
}

/**
 * Sends `100 Continue` if the request asks for it and nothing has been sent yet: for a
 * hook that is about to read the body itself (a GET's chunked body, validation.ts).
 */
export function continueIfExpected(req: FastifyRequest, reply: FastifyReply): void {
  const { raw } = req;
  const expect = req.headers.expect;
  if (expect === undefined || !CONTINUE.test(expect) || reply.raw.headersSent || continued.has(raw)) return;
  if (raw.httpVersionMajor > 1 || (raw.httpVersionMajor === 1 && raw.httpVersionMinor >= 1)) {
    continued.add(raw);
    reply.raw.writeContinue();
  }
}

/**
 * True when the request's body will be refused from its headers, unread: a declared
 * length over the route's body limit (413), or a body that is not JSON on an unknown
 * route (404), on a route that takes JSON (415), or with a length on a route that takes
 * none (400). A JSON body is read whatever the route, and a chunked one on a route that
 * takes none is read as far as its first byte (validation.ts).
 */
function refusedUnread(req: FastifyRequest): boolean {
  const length = req.headers['content-length'];
  if (length !== undefined && Number(length) > req.routeOptions.bodyLimit) return true;
  const framing = bodyFraming(req);
  if (framing === 'empty') return false;
  if (declaresJson(req)) return false;
  return req.is404 || takesBody(req) || framing === 'sized';
}
