/**
 * Operations routes (DESIGN.md §7): liveness, readiness and Prometheus metrics. They
 * need no token, like most health endpoints, so probes and scrapers can reach them
 * (`security: []` says so in the OpenAPI document), and they ignore query parameters:
 * a probe or scraper that adds some still gets its answer.
 */
// Adds the OpenAPI fields (summary, tags, security) to route schema types.
import type {} from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { PixiuError } from '../../errors.js';
import { ReplyError } from 'ioredis';
import { connectRefusal, isCommandTimeout, redisUnavailable } from '../../redis/client.js';
import { Keys } from '../../redis/keys.js';
import { writeReadinessProbe } from '../../redis/readiness-probe.js';
import { redisStateReason } from '../../redis/state-replies.js';
import { cutText } from '../../text-cut.js';
import type { ApiDeps } from '../deps.js';
import { answerObject, opsErrorResponses, unavailableAnswer } from '../schemas.js';

/**
 * The message of `/readyz` during the drain delay after SIGTERM (`PIXIU_DRAIN_DELAY`;
 * docs/api.md, "Operations"; docs/decisions.md, "Drain delay").
 */
export const DRAINING = 'this node is shutting down (PIXIU_DRAIN_DELAY): it still serves requests and WebSockets until its drain delay ends, then stops; send new work to another node';

/** An answer `{"status": <value>}`. */
function statusBody(value: string, description: string) {
  return answerObject({ status: { type: 'string', enum: [value] } }, ['status'], description);
}

/** Registers `/healthz`, `/readyz` and `/metrics`. */
export function healthRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const probeKey = new Keys(deps.config.redisPrefix).readinessProbe();
  app.get('/healthz', {
    schema: {
      summary: 'Liveness: the process answers',
      operationId: 'getHealth',
      tags: ['ops'],
      security: [],
      response: { 200: statusBody('ok', 'The process runs'), ...opsErrorResponses },
    },
  }, async () => ({ status: 'ok' }));

  app.get('/readyz', {
    // A 503 here is the answer "not ready" (a node starting, Redis down), asked every
    // few seconds by a probe: logged at debug, not as a request an outage failed.
    config: { unavailableIsAnswer: true },
    schema: {
      summary: 'Readiness: Redis takes a write and the store is open and takes messages',
      operationId: 'getReadiness',
      tags: ['ops'],
      security: [],
      response: {
        200: statusBody('ready', 'Ready: Redis takes a write and the message store is open and takes messages'),
        ...opsErrorResponses,
        503: unavailableAnswer('Not ready: UNAVAILABLE, Redis does not answer, refuses this node\'s connection (a password it requires) or refuses writes (full, read-only replica, unable to persist to its disk), or the store is not open or takes no messages now '
          + '(a partition reopening after a failed write, e.g. a full disk, or with a write in flight past PIXIU_STORE_WRITE_TIMEOUT, a stalled disk; writes suspended while another store holds its partition claim), or this node is shutting down (from SIGTERM on with PIXIU_DRAIN_DELAY, other routes still served)'),
      },
    },
  }, async () => {
    // First: the drain delay is for a load balancer to take the node out, whatever
    // Redis and the store say (src/cli/serve.ts).
    if (deps.draining?.() === true) throw new PixiuError('UNAVAILABLE', DRAINING);
    if (!deps.store.isOpen) throw new PixiuError('UNAVAILABLE', 'the message store is not open');
    const problem = deps.writeProblem?.();
    if (problem !== undefined) throw new PixiuError('UNAVAILABLE', problem);
    try {
      // A write, not PING (src/redis/readiness-probe.ts): one short-lived key per prefix.
      await writeReadinessProbe(deps.redis, probeKey);
    } catch (err) {
      // A state reply (full, read-only …) in the words a request's 503 gives it too;
      // another reply's first line, cut as the project cuts text it repeats (text-cut.ts).
      // No connection because Redis refuses it (a password it now requires): said so.
      throw redisUnavailable(err instanceof ReplyError
        ? redisStateReason(err) ?? `Redis refuses writes: ${cutText((err as Error).message.split('\n')[0] ?? '', 200)}`
        : isCommandTimeout(err)
          ? 'Redis did not answer within the command timeout (Redis down or hung, or this node too busy to read its answer in time)'
          : connectRefusal(deps.redis) ?? 'Redis does not answer', err);
    }
    return { status: 'ready' };
  });

  app.get('/metrics', {
    schema: {
      summary: 'Prometheus metrics',
      operationId: 'getMetrics',
      tags: ['ops'],
      security: [],
      response: {
        // Described per content type, so the document says text/plain. fastify sends a
        // string answer of a non-JSON content type as it is: this schema never
        // serializes the text.
        200: {
          description: 'The metrics in the Prometheus text exposition format (version 0.0.4)',
          content: { 'text/plain': { schema: { type: 'string' } } },
        },
        ...opsErrorResponses,
      },
    },
  }, async (_req, reply) => {
    reply.type(deps.metrics.registry.contentType);
    return deps.metrics.registry.metrics();
  });
}
