/**
 * Operations routes (DESIGN.md §7): liveness, readiness and Prometheus metrics. They
 * need no token, like most health endpoints, so probes and scrapers can reach them
 * (`security: []` says so in the OpenAPI document), and they ignore query parameters:
 * a probe or scraper that adds some still gets its answer. What anyone may make them
 * cost is bounded: `/readyz`'s Redis writes (src/api/shared-probe.ts), and `/metrics`'
 * scrapes, each of a cost that no longer grows with the node (src/api/process-metrics.ts)
 * and node-wide at most {@link SCRAPE_LIMIT} (a scrape with the API token is not held to it).
 */
// Adds the OpenAPI fields (summary, tags, security) to route schema types.
import type {} from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { PixiuError } from '../../errors.js';
import { bearerMatches, secretDigest } from '../../auth/api-token.js';
import { ReplyError } from 'ioredis';
import { connectRefusal, isCommandTimeout, redisUnavailable } from '../../redis/client.js';
import { Keys } from '../../redis/keys.js';
import { redisStateReason } from '../../redis/state-replies.js';
import { cutText } from '../../text-cut.js';
import { rateWords, type RateLimit } from '../../gateway/user-rate.js';
import type { ApiDeps } from '../deps.js';
import { NodeRate } from '../node-rate.js';
import { answerObject, errorBody, opsErrorResponses, PIPELINED_WORDS, retryAfterHeader, unavailableAnswer } from '../schemas.js';
import { PROBE_LIMIT, SharedReadinessProbe } from '../shared-probe.js';

/**
 * The message of `/readyz` during the drain delay after SIGTERM (`PIXIU_DRAIN_DELAY`;
 * docs/api.md, "Operations"; docs/decisions.md, "Drain delay").
 */
export const DRAINING = 'this node is shutting down (PIXIU_DRAIN_DELAY): it still serves requests and WebSockets until its drain delay ends, then stops; send new work to another node';

/**
 * `GET /metrics` scrapes on one node, all clients together: a burst of 200, then 50 a
 * second. A scrape costs the event loop about 2.4 ms whatever the node holds
 * (src/api/process-metrics.ts), so past the burst scrapes take at most ~12% of it;
 * Prometheus servers scraping every second or more, several of them, stay far below
 * (secaudit F2). docs/decisions.md, "Operations routes under load".
 */
export const SCRAPE_LIMIT: RateLimit = Object.freeze({ burst: 200, perMinute: 3000 });

/**
 * Whether a scrape is held to {@link SCRAPE_LIMIT}: unless it carries the API token
 * (`Authorization: Bearer <PIXIU_API_TOKEN>`, Prometheus's `authorization:
 * credentials_file`). Anyone could otherwise keep the shared rate spent and have the
 * operator's own scrapes refused 429, which Prometheus reads as the target down (the
 * reread's finding 1). A wrong token is no refusal here: the scrape is an anonymous
 * one, held to the limit. The token is hashed only when a header is sent.
 * @param expected the API token's digest (api-token.ts `secretDigest`)
 */
function limitedScrape(authorization: string | undefined, expected: Buffer): boolean {
  return authorization === undefined || !bearerMatches(authorization, expected);
}

/** Why a scrape is refused 429 (its message, and the OpenAPI document's words). */
const OVER_SCRAPE_WORDS = `this node's /metrics scrapes are over their rate (${rateWords(SCRAPE_LIMIT)}, all clients together); nothing collected. Scrape again after Retry-After, or with the API token, which this rate does not hold (docs/api.md, "Operations")`;

/** An answer `{"status": <value>}`. */
function statusBody(value: string, description: string) {
  return answerObject({ status: { type: 'string', enum: [value] } }, ['status'], description);
}

/** Registers `/healthz`, `/readyz` and `/metrics`. */
export function healthRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const probe = new SharedReadinessProbe(deps.redis, new Keys(deps.config.redisPrefix).readinessProbe(), PROBE_LIMIT, deps.opsClock);
  const scrapes = new NodeRate(SCRAPE_LIMIT, deps.opsClock);
  const apiTokenDigest = secretDigest(deps.apiToken);
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
      // A write, not PING (src/redis/readiness-probe.ts): one short-lived key per prefix,
      // shared between calls and bounded in rate (src/api/shared-probe.ts).
      await probe.check();
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
        429: { ...errorBody, description: `RATE_LIMITED: ${OVER_SCRAPE_WORDS}. Or ${PIPELINED_WORDS}`, headers: retryAfterHeader },
      },
    },
  }, async (req, reply) => {
    const retryAfterSeconds = limitedScrape(req.headers.authorization, apiTokenDigest) ? scrapes.take() : 0;
    if (retryAfterSeconds > 0) throw new PixiuError('RATE_LIMITED', `${OVER_SCRAPE_WORDS}; retry after ${retryAfterSeconds} s`, { retryAfterSeconds });
    reply.type(deps.metrics.registry.contentType);
    return deps.metrics.registry.metrics();
  });
}
