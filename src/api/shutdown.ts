/**
 * How the HTTP app drains (DESIGN.md §6; docs/decisions.md "Shutdown drains HTTP"): once
 * the node stops taking requests, a request that reaches routing is refused 503
 * UNAVAILABLE ({@link SHUTTING_DOWN}, `Retry-After`, `Connection: close`) before anything
 * is done, and the answers of the requests still in flight end their connections, as do
 * all answers in the drain delay (`PIXIU_DRAIN_DELAY`). Of requests pipelined on one
 * connection, only the answer of the last one in progress does, so that every request
 * dispatched is answered (pipelining-bound.ts `laterInProgress`).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { PixiuError } from '../errors.js';
import { markClosing } from './closing-answers.js';
import { sendError } from './error-handler.js';
import { laterInProgress } from './pipelining-bound.js';

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * From now on every request is refused 503 UNAVAILABLE ({@link SHUTTING_DOWN},
     * `Retry-After`, `Connection: close`): the first step of draining, called just
     * before `close()` (src/service/service.ts). Idempotent.
     */
    stopTakingRequests(): void;
  }
}

/** The message of a request refused because the node is draining (docs/api.md, "Operations", Shutdown). */
export const SHUTTING_DOWN = 'this node is shutting down; send the request again, to another node or once this one is back';

/**
 * Decorates `app` with `stopTakingRequests` and adds the hooks that drain it. Call it
 * before any other onRequest hook, so that no other check answers a request first.
 * @param draining true once the node is in its drain delay (ApiDeps.draining); unset: never
 * @param onRefused called with each request refused as the node shuts down (metrics)
 */
export function installShutdown(app: FastifyInstance, draining: (() => boolean) | undefined,
  onRefused: (err: PixiuError, req: FastifyRequest) => void): void {
  // Shutdown (DESIGN.md §6): once close() has begun (fastify runs preClose hooks as it
  // stops listening), the answers of the requests still in flight end their
  // connections. Node closes only the connections idle when the server closes; a
  // keep-alive connection whose request was in flight would stay open after its
  // answer and hold the close up until the grace period (src/gateway/upgrade-guard.ts).
  // `closing` is also set by stopTakingRequests, which the service calls just before
  // close(): fastify runs preClose hooks a few turns of the event loop after close()
  // begins, and a request routed meanwhile would be served.
  let closing = false;
  app.decorate('stopTakingRequests', () => {
    closing = true;
  });
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  // Draining: nothing new is done (see return503OnClosing in app.ts). The first onRequest
  // hook, so that no other check answers first. Answered here, not through the error
  // handler, which would log it as an outage: at info, as fastify did.
  app.addHook('onRequest', (req, reply, done) => {
    if (!closing) {
      done();
      return;
    }
    const err = new PixiuError('UNAVAILABLE', SHUTTING_DOWN);
    onRefused(err, req);
    req.log.info('request refused: this node is shutting down');
    void sendError(reply, err);
  });
  // In the drain delay too: a keep-alive connection open to this node would otherwise
  // bring its client back here, past a load balancer that has taken the node out,
  // until the listener closes under it (ECONNRESET); its next request opens a new one.
  // Only the answer of the connection's last request in progress closes it: Node ends
  // the connection after an answer with `Connection: close`, and the answers of the
  // requests pipelined behind it, already dispatched and acted on (a message stored),
  // would never be written; the last one's answer carries the close instead. The
  // connection is marked as the close is decided (closing-answers.ts), so a request
  // parsed after it (sent before its client read the close) is not acted on.
  app.addHook('onSend', (req, reply, payload, done) => {
    if ((closing || draining?.() === true) && !laterInProgress(reply.raw)) {
      void reply.header('connection', 'close');
      markClosing(req.raw.socket);
    }
    done(null, payload);
  });
}
