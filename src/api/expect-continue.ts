/**
 * `Expect: 100-continue` (RFC 9110 §10.1.1): the interim 100 goes out only once the
 * request has passed every check made from its headers and its body is about to be
 * read. Node answers 100 as soon as the headers arrive unless something listens for
 * 'checkContinue', so a request that was then refused from its headers (no token, a
 * content type other than JSON, a length over the limit) was first invited to send a
 * body that would never be read: `100 Continue`, then `401` (a fresh tester's finding).
 * The RFC lets a server answer the final status at once instead, which is what a
 * client asking the question wants to know before it uploads.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { takesBody } from './validation.js';

/** Node's own test of the header (lib/_http_server.js `continueExpression`). */
const CONTINUE = /(?:^|\W)100-continue(?:$|\W)/i;

/**
 * Makes `app` answer `100 Continue` from its `preParsing` hook (after the `onRequest`
 * hooks: the token, the content coding and charset) and only when the body will be
 * read: the route takes a body, it is declared `application/json`, and its declared
 * length is within the route's body limit. Otherwise the request's final answer is the
 * first thing the client hears.
 */
export function installContinue(app: FastifyInstance): void {
  app.server.on('checkContinue', (req, res) => app.server.emit('request', req, res));
  app.addHook('preParsing', (req, reply, payload, done) => {
    const expect = req.headers.expect;
    if (expect !== undefined && CONTINUE.test(expect) && !reply.raw.headersSent && bodyWillBeRead(req)) reply.raw.writeContinue();
    done(null, payload);
  });
}

/** True when the parser will read this request's body rather than refuse it from its headers. */
function bodyWillBeRead(req: FastifyRequest): boolean {
  if (req.is404 || !takesBody(req)) return false;
  const type = req.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/json') return false;
  const length = req.headers['content-length'];
  return length === undefined || (Number(length) > 0 && Number(length) <= req.routeOptions.bodyLimit);
}
