/**
 * The producer and admin routes' scope (docs/api.md, "Authentication"): routes registered
 * through it require the API token, checked in an onRequest hook before the body is
 * read; a refusal is logged at warn, thinned ({@link API_TOKEN_REFUSED}), never with the
 * token.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { apiTokenChecker, bearerToken } from '../auth/api-token.js';
import { LogThrottle, OUTAGE_LOG_INTERVAL_MS, thinnedFields } from '../log-throttle.js';
import type { ProducerScope } from './deps.js';
import { clientIp } from './client-ip.js';

/**
 * The warning of a producer or admin request refused 401 (logged at most once per
 * {@link OUTAGE_LOG_INTERVAL_MS}, with `notLogged`): a node whose `PIXIU_API_TOKEN`
 * is not the producers' refuses all their requests sent to it.
 */
export const API_TOKEN_REFUSED = 'producer request refused 401: the API token did not match this node\'s PIXIU_API_TOKEN '
  + '(nodes sharing a Redis need the same one; docs/api.md, "Authentication")';

/**
 * A {@link ProducerScope} of `app`: each call registers its routes in a new scope of
 * `app` whose requests are refused 401 UNAUTHORIZED unless they carry `apiToken`.
 * @param apiToken the producer/admin bearer token (PIXIU_API_TOKEN)
 */
export function producerScopeOf(app: FastifyInstance, apiToken: string): ProducerScope {
  const checkToken = apiTokenChecker(apiToken);
  const refusals = new LogThrottle(OUTAGE_LOG_INTERVAL_MS);
  return async (routes) => {
    await app.register(async (scope) => {
      // A callback hook, not an async one: no promise per request for a check that
      // never waits.
      scope.addHook('onRequest', (req, _reply, done) => {
        try {
          checkToken(req.headers.authorization);
        } catch (err) {
          // Logged, thinned: a node given another token than the producers' refused half
          // their requests and said nothing (a black-box SRE's finding). Never the token.
          const left = refusals.take();
          if (left !== undefined) req.log.warn(tokenRefusalFields(req, left), API_TOKEN_REFUSED);
          done(err as Error);
          return;
        }
        done();
      });
      routes(scope);
    });
  };
}

/**
 * The fields of {@link API_TOKEN_REFUSED}: the route (its pattern, not the path: no
 * user id), the method, whether a token was sent at all, the client's `ip`
 * (client-ip.ts: PIXIU_TRUST_PROXY), and how many lines were left out before it. Never
 * the token or the header.
 */
function tokenRefusalFields(req: FastifyRequest, left: number): Record<string, unknown> {
  const sent = bearerToken(req.headers.authorization) !== undefined;
  return {
    method: req.method, route: req.routeOptions.url ?? req.url.split('?')[0], ip: clientIp(req),
    reason: sent ? 'the bearer token sent is not this node\'s API token' : 'no Authorization: Bearer token was sent',
    ...thinnedFields(left),
  };
}
