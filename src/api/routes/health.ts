/**
 * Operations routes (DESIGN.md §7): liveness, readiness and Prometheus metrics. They
 * need no token, like most health endpoints, so probes and scrapers can reach them.
 */
// Adds the OpenAPI fields (summary, tags) to route schema types.
import type {} from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { PixiuError } from '../../errors.js';
import type { ApiDeps } from '../deps.js';
import { errorBody } from '../schemas.js';

/** Registers `/healthz`, `/readyz` and `/metrics`. */
export function healthRoutes(app: FastifyInstance, deps: ApiDeps): void {
  app.get('/healthz', {
    schema: { summary: 'Liveness: the process answers', tags: ['ops'] },
  }, async () => ({ status: 'ok' }));

  app.get('/readyz', {
    schema: {
      summary: 'Readiness: Redis answers PING and the store is open',
      tags: ['ops'],
      response: { 503: errorBody },
    },
  }, async () => {
    if (!deps.store.isOpen) throw new PixiuError('UNAVAILABLE', 'the message store is not open');
    try {
      await deps.redis.ping();
    } catch (err) {
      throw new PixiuError('UNAVAILABLE', 'Redis does not answer', { cause: err });
    }
    return { status: 'ready' };
  });

  app.get('/metrics', {
    schema: { summary: 'Prometheus metrics', tags: ['ops'] },
  }, async (_req, reply) => {
    reply.type(deps.metrics.registry.contentType);
    return deps.metrics.registry.metrics();
  });
}
