/**
 * The HTTP application: fastify with Pixiu's validation, error catalogue, auth and
 * routes (DESIGN.md §7). The OpenAPI document is served at `GET /v1/openapi.json`.
 */
import type { IncomingMessage } from 'node:http';
import swagger from '@fastify/swagger';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyContextConfig, type FastifyInstance, type FastifyRequest } from 'fastify';
import { apiTokenChecker, bearerToken } from '../auth/api-token.js';
import { LogThrottle, OUTAGE_LOG_INTERVAL_MS, thinnedFields } from '../log-throttle.js';
import { PixiuError } from '../errors.js';
import type { Logger } from '../logger.js';
import { isRedisFailure } from '../redis/client.js';
import type { ApiDeps, ProducerScope } from './deps.js';
import type { Metrics } from './metrics.js';
import { frameworkErrorAnswerer, clientErrorAnswerer, expectationAnswerer, installErrorHandlers, sendError } from './error-handler.js';
import { connectMethodAnswerer } from './connect-method.js';
import { installContinue } from './expect-continue.js';
import { HISTORY_BYTES_IN_FLIGHT, HistoryBudget } from './history-budget.js';
import { healthRoutes } from './routes/health.js';
import { historyRoutes } from './routes/history.js';
import { messageRoutes } from './routes/messages.js';
import { withPortablePatterns } from './portable-patterns.js';
import { MAX_PATH_PARAM_LENGTH } from './schemas.js';
import { describeErrors, installValidators, takesBody } from './validation.js';
import { quotedText } from '../text-cut.js';

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

/** Path of the OpenAPI document. */
export const OPENAPI_PATH = '/v1/openapi.json';

/**
 * Builds the app (not yet listening).
 * @param deps the service's parts
 * @param logger the root logger; requests log through a child
 */
export async function buildApp(deps: ApiDeps, logger: Logger): Promise<FastifyInstance> {
  // The routes whose refusals count beyond pixiu_http_errors_total, recorded as they are
  // added (the onRoute hook below): a request refused before routing is matched against
  // them (countedAs), so the routes' own config is the one place that says what counts.
  const counted: CountedRoute[] = [];
  const app = Fastify({
    // pino's Logger is a FastifyBaseLogger; naming the base type keeps the instance's
    // type the default one that route modules take.
    loggerInstance: logger as FastifyBaseLogger,
    // No line per request: at thousands of messages per second that is most of the
    // log. Failures are logged by the error handler.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: deps.config.maxBodyBytes,
    // A request whose line, headers or body stop arriving is answered 408 and its
    // connection closed (clientErrorAnswerer), not held open for good: fastify's own
    // default turns Node's requestTimeout off. Node checks every
    // connectionsCheckingInterval, so the answer comes up to a quarter late.
    requestTimeout: deps.config.requestTimeoutMs,
    // A request that reaches routing while the server drains (on a keep-alive connection
    // already open, or pipelined behind one in flight) is refused 503 UNAVAILABLE with
    // `Retry-After` and `Connection: close`, before anything is done: serving it instead
    // would store a message whose answer Node may never deliver (the connection ends
    // after the answer in flight), and a producer would send it again. Refused by the
    // first onRequest hook below, in the catalogue's shape, not by fastify, whose own
    // 503 body is not Pixiu's and carries no Retry-After (a contract tester's finding).
    // Only a request whose head was arriving as draining began gets it: a pipelined
    // one's 503 is never sent, the answer in flight having ended the connection
    // (docs/decisions.md "Shutdown drains HTTP").
    return503OnClosing: false,
    // An HTTP/1.1 request without Host is refused here (RFC 9112 §3.2), with the
    // catalogue's body, rather than by Node with an empty 400. Headers must arrive
    // within the request timeout too (Node's default is 60 s whatever it is).
    http: {
      requireHostHeader: false,
      headersTimeout: Math.min(60_000, deps.config.requestTimeoutMs),
      connectionsCheckingInterval: Math.min(30_000, Math.floor(deps.config.requestTimeoutMs / 4)),
    },
    // A user id may be 128 code points, percent-encoded in a path; fastify's default
    // (100 characters) would refuse valid ids with its own 414 body.
    routerOptions: { maxParamLength: MAX_PATH_PARAM_LENGTH },
    // Router errors (a bad percent-encoding) answer with the catalogue's body too.
    // Refused before routing there may be no route config: the path says what it was sent to.
    frameworkErrors: frameworkErrorAnswerer((err, req) => countError(deps.metrics, err, routedOrPath(req.routeOptions?.config, counted, req.raw))),
    // Requests Node's HTTP parser refuses: the catalogue's body, not fastify's.
    clientErrorHandler: clientErrorAnswerer((err, req) => countError(deps.metrics, err, countedAs(counted, req))),
    schemaErrorFormatter: (errors, dataVar) => new Error(describeErrors(dataVar, errors)),
  });
  app.addHook('onRoute', (route) => {
    const { ingestRoute, wsHandshake } = route.config ?? {};
    if (ingestRoute === undefined && wsHandshake !== true) return;
    // Not the HEAD route fastify adds beside a GET one: a HEAD request refused before
    // routing is no handshake.
    for (const method of [route.method].flat()) {
      if (method !== 'HEAD') counted.push({ method, segments: route.url.split('/'), config: { ingestRoute, wsHandshake } });
    }
  });
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
  // Draining: nothing new is done (see return503OnClosing above). The first onRequest
  // hook, so that no other check answers first. Answered here, not through the error
  // handler, which would log it as an outage: at info, as fastify did.
  app.addHook('onRequest', (req, reply, done) => {
    if (!closing) {
      done();
      return;
    }
    const err = new PixiuError('UNAVAILABLE', SHUTTING_DOWN);
    countError(deps.metrics, err, req.routeOptions.config);
    req.log.info('request refused: this node is shutting down');
    void sendError(reply, err);
  });
  // In the drain delay too: a keep-alive connection open to this node would otherwise
  // bring its client back here, past a load balancer that has taken the node out,
  // until the listener closes under it (ECONNRESET); its next request opens a new one.
  app.addHook('onSend', (_req, reply, payload, done) => {
    if (closing || deps.draining?.() === true) void reply.header('connection', 'close');
    done(null, payload);
  });
  installValidators(app);
  // History answers in flight, node-wide (history-budget.ts); one not taken by its client
  // in time closes its connection.
  app.decorate('historyBudget', new HistoryBudget(HISTORY_BYTES_IN_FLIGHT, deps.config.historyTakeTimeoutMs,
    () => deps.metrics.historyConnectionsClosed.inc()));
  // An Expect other than 100-continue: the catalogue's 417, not Node's bare one.
  app.server.on('checkExpectation', expectationAnswerer((err, req) => countError(deps.metrics, err, countedAs(counted, req))));
  app.server.on('connect', connectMethodAnswerer((err, req) => countError(deps.metrics, err, countedAs(counted, req))));
  // Expect: 100-continue is answered 100 only when the body will be read.
  installContinue(app);
  // Bodies are read as they come: a compressed one would be parsed as JSON and refused
  // with a misleading "not valid JSON". Say what is wrong instead (RFC 9110 §15.5.16:
  // 415 for an unsupported content coding).
  // Likewise a charset other than UTF-8: JSON exchanged between systems is UTF-8 (RFC
  // 8259 §8.1), and a body declared otherwise would be read as UTF-8 all the same.
  app.addHook('onRequest', (req, reply, done) => {
    // A request that asked for an upgrade ends its connection after its answer, whoever
    // gives it (src/gateway/upgrade-guard.ts); said here, in the first onRequest hook
    // that can refuse such a request, so that answers of later hooks (a refused token)
    // say so too. The two before it cannot: the shutdown refusal answers with
    // `Connection: close` anyway, and installValidators' GET-body check skips upgrades.
    if ((req.raw as { upgrade?: boolean }).upgrade === true) void reply.header('connection', 'close');
    // Node's parser also takes a request line with no version (read as HTTP/0.9) and
    // HTTP/2.0 spelt as text; neither is HTTP/1.x (RFC 9112 §2.3, §3).
    const version = req.raw.httpVersion;
    if (version !== '1.1' && version !== '1.0') {
      void reply.header('connection', 'close');
      done(new PixiuError('INVALID_REQUEST', version === '0.9'
        ? 'the request line has no HTTP version: send HTTP/1.1 (RFC 9112 §3)'
        : `HTTP/${version} is not spoken here: send HTTP/1.1 (RFC 9112 §2.3)`));
      return;
    }
    if (req.headers.host === undefined && version === '1.1') {
      void reply.header('connection', 'close');
      done(new PixiuError('INVALID_REQUEST', 'a Host header is required (RFC 9112 §3.2)'));
      return;
    }
    // Node keeps the first of several: which host was meant is unknown (RFC 9112 §3.2: 400).
    if (hostLines(req.raw.rawHeaders) > 1) {
      void reply.header('connection', 'close');
      done(new PixiuError('INVALID_REQUEST', 'more than one Host header (RFC 9112 §3.2)'));
      return;
    }
    // A fragment never travels (a client strips it); one sent raw would be read as part
    // of the last query value (`limit=1#x`: "limit must be an integer").
    if (req.raw.url?.includes('#') === true) {
      done(new PixiuError('INVALID_REQUEST', 'the request target has a fragment (#…): it is not sent to a server (RFC 9112 §3.2); percent-encode # as %23 in a value'));
      return;
    }
    // The router refuses a path that is not validly percent-encoded (FST_ERR_BAD_URL);
    // fastify's query parser keeps a bad escape as it is (`epoch=%FF` read as "%FF"), so
    // the value would be misread, not refused. Refused here in the same words.
    if (!queryWellEncoded(req.raw.url ?? '')) {
      done(new PixiuError('INVALID_REQUEST', 'the URL is not validly percent-encoded'));
      return;
    }
    // A route that takes no body (the not-found one included) accepts an empty one
    // whatever its headers say, and refuses any other as "this route takes no body"
    // (validation.ts).
    if (!takesBody(req)) {
      done();
      return;
    }
    // Node's parser reads a body whose last transfer coding is chunked, and ignores the
    // codings before it (`gzip, chunked`): the body would be parsed still encoded.
    const transfer = req.headers['transfer-encoding'];
    if (transfer !== undefined && transfer.split(',').some((c) => c.trim().toLowerCase() !== 'chunked')) {
      void reply.header('connection', 'close');
      done(new PixiuError('NOT_IMPLEMENTED', `Transfer-Encoding ${quotedText(transfer, 100)} is not supported: send the body with chunked alone, or with Content-Length`));
      return;
    }
    const coding = req.headers['content-encoding'];
    if (coding !== undefined && coding.trim().toLowerCase() !== 'identity') {
      done(new PixiuError('UNSUPPORTED_MEDIA_TYPE', `Content-Encoding ${quotedText(coding, 100)} is not supported: send the body uncompressed`));
      return;
    }
    const charset = charsetOf(req.headers['content-type']);
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      done(new PixiuError('UNSUPPORTED_MEDIA_TYPE', `charset ${quotedText(charset, 100)} is not supported: JSON bodies are UTF-8`));
      return;
    }
    done();
  });
  installErrorHandlers(app, (err, req) => {
    countError(deps.metrics, err, req.routeOptions.config);
    // Only a failed Redis call: not the store, another node, a JWKS fetch or a busy node.
    if (isRedisFailure(err)) deps.metrics.redisErrors.inc({ kind: 'request' });
  });

  await app.register(swagger, {
    openapi: {
      // 3.1: its schemas are JSON Schema 2020-12, whose patterns are read with the u
      // flag, per code point, as the id patterns' surrogate range needs (read per UTF-16
      // unit it would refuse every astral character, emoji included).
      openapi: '3.1.0',
      info: {
        title: 'Pixiu',
        version: '1',
        // No `license`: package.json declares none, and the document does not invent one.
        description: 'Durable real-time messaging. Producers POST messages; devices receive them over WebSocket (GET /v1/connect). Errors are {"error": {"code", "message"}}. No license is declared for this project.',
      },
      // Relative: the routes are served by whatever host and port serve this document.
      servers: [{ url: '/', description: 'the Pixiu node that serves this document' }],
      components: {
        securitySchemes: {
          apiToken: { type: 'http', scheme: 'bearer', description: 'the producer/admin API token' },
          userToken: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'a client JWT (sub = user id)' },
        },
      },
      security: [{ apiToken: [] }],
    },
    // The id patterns' `\s\p{Cc}\p{Cs}` as ranges every regex engine reads alike, and the
    // MsgID's whole rule where the answers' schemas hold its shape (portable-patterns.ts).
    transformObject: (doc) => withPortablePatterns('openapiObject' in doc ? doc.openapiObject : doc.swaggerObject),
  });

  healthRoutes(app, deps);
  app.get(OPENAPI_PATH, { schema: { hide: true } }, async () => app.swagger());

  // Producer and admin routes: the API token, checked before the body is read.
  const checkToken = apiTokenChecker(deps.apiToken);
  const refusals = new LogThrottle(OUTAGE_LOG_INTERVAL_MS);
  const producerScope: ProducerScope = async (routes) => {
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
  await producerScope((scope) => {
    messageRoutes(scope, deps);
    historyRoutes(scope, deps);
  });
  await deps.extend?.(app, producerScope);
  return app;
}

/**
 * The `charset` parameter of a Content-Type, lower-cased and unquoted (a quoted value as
 * it is between its quotes); undefined when none. Of several, the first that is not
 * UTF-8: `charset=utf-8; charset=latin1` is refused as its reverse is.
 */
function charsetOf(contentType: string | undefined): string | undefined {
  if (contentType === undefined || !contentType.toLowerCase().includes('charset')) return undefined;
  let first: string | undefined;
  for (const m of contentType.matchAll(/;\s*charset\s*=\s*(?:"([^"]*)"|([^;\s]*))/gi)) {
    const value = (m[1] ?? m[2] ?? '').toLowerCase();
    if (value !== 'utf-8' && value !== 'utf8') return value;
    first ??= value;
  }
  return first;
}

/** What a route's refusals count in besides `pixiu_http_errors_total` (its route config). */
type CountedAs = Pick<FastifyContextConfig, 'ingestRoute' | 'wsHandshake'> | undefined;

/**
 * A route whose refusals count beyond `pixiu_http_errors_total` (its config names
 * `ingestRoute` or `wsHandshake`), as added: its method, its path's segments (`:name`
 * stands for any one that is not empty) and that config.
 */
interface CountedRoute {
  readonly method: string;
  readonly segments: readonly string[];
  readonly config: CountedAs;
}

/**
 * Counts an error answer in `pixiu_http_errors_total`; on `POST /v1/messages`,
 * `/v1/broadcast` and `/v1/channels/{channel}/publish` (route config `ingestRoute`),
 * in `pixiu_ingest_messages_total` by its code too: a refused request there is one
 * refused message, whatever refused it (a batch counts its items itself: its route has
 * no `ingestRoute`); on `GET /v1/connect` (`wsHandshake`), in
 * `pixiu_ws_handshakes_total` by its code.
 */
function countError(metrics: Metrics, err: PixiuError, route: CountedAs): void {
  metrics.httpErrors.inc({ code: err.code });
  if (route?.ingestRoute !== undefined) metrics.countIngest(route.ingestRoute, err.code);
  if (route?.wsHandshake === true) metrics.countHandshake(err.code);
}

/**
 * What a request refused before fastify routed it (a client error, a 417, a bad
 * percent-encoding) counts as, read from its method and path: the config of the route
 * of `routes` it was sent to, matched segment by segment as sent (not decoded: a bad
 * percent-encoding is one of the refusals counted); undefined when none.
 */
function countedAs(routes: readonly CountedRoute[], req: IncomingMessage | undefined): CountedAs {
  const path = req?.url?.split('?')[0];
  if (path === undefined) return undefined;
  const segments = path.split('/');
  return routes.find((r) => r.method === req?.method && r.segments.length === segments.length
    && r.segments.every((s, i) => (s.startsWith(':') ? segments[i] !== '' : s === segments[i])))?.config;
}

/** The route config when it names what a refusal counts as, else what the path says ({@link countedAs}). */
function routedOrPath(config: CountedAs, routes: readonly CountedRoute[], req: IncomingMessage): CountedAs {
  return config?.ingestRoute !== undefined || config?.wsHandshake === true ? config : countedAs(routes, req);
}

/**
 * False when the request target's query string holds an escape that is not `%` and two
 * hex digits, or escapes that do not decode to UTF-8 (`%FF`, `%C3` alone): what
 * `decodeURIComponent` refuses (RFC 3986 §2.1).
 */
function queryWellEncoded(target: string): boolean {
  const at = target.indexOf('?');
  if (at < 0 || !target.includes('%', at)) return true;
  try {
    decodeURIComponent(target.slice(at + 1));
    return true;
  } catch {
    return false;
  }
}

/** How many `Host` field lines a request's raw headers (name, value, name, value, …) hold. */
function hostLines(raw: readonly string[]): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]?.length === 4 && raw[i]?.toLowerCase() === 'host') n++;
  return n;
}

/**
 * The warning of a producer or admin request refused 401 (logged at most once per
 * {@link OUTAGE_LOG_INTERVAL_MS}, with `notLogged`): a node whose `PIXIU_API_TOKEN`
 * is not the producers' refuses all their requests sent to it.
 */
export const API_TOKEN_REFUSED = 'producer request refused 401: the API token did not match this node\'s PIXIU_API_TOKEN '
  + '(nodes sharing a Redis need the same one; docs/api.md, "Authentication")';

/**
 * The fields of {@link API_TOKEN_REFUSED}: the route (its pattern, not the path: no
 * user id), the method, whether a token was sent at all, and how many lines were left
 * out before it. Never the token or the header.
 */
function tokenRefusalFields(req: FastifyRequest, left: number): Record<string, unknown> {
  const sent = bearerToken(req.headers.authorization) !== undefined;
  return {
    method: req.method, route: req.routeOptions.url ?? req.url.split('?')[0],
    reason: sent ? 'the bearer token sent is not this node\'s API token' : 'no Authorization: Bearer token was sent',
    ...thinnedFields(left),
  };
}
