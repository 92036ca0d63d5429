/**
 * The HTTP application: fastify with Pixiu's validation, error catalogue, auth and
 * routes (DESIGN.md §7), assembled from their modules in the order their hooks must run:
 * the bound on a connection's pipelining (pipelining-bound.ts), ahead of fastify's own
 * handler, then the shutdown refusal (shutdown.ts), the validators, the request-line and header checks
 * (request-checks.ts), the error handlers, which count every error answer
 * (refusal-counts.ts), then the routes, the producer ones behind the API token
 * (producer-scope.ts). The OpenAPI document is served at `GET /v1/openapi.json`.
 */
import type { IncomingMessage } from 'node:http';
import swagger from '@fastify/swagger';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { PixiuError } from '../errors.js';
import type { Logger } from '../logger.js';
import { isRedisFailure } from '../redis/client.js';
import type { ApiDeps } from './deps.js';
import { frameworkErrorAnswerer, clientErrorAnswerer, expectationAnswerer, installErrorHandlers, logRejected } from './error-handler.js';
import { connectMethodAnswerer } from './connect-method.js';
import { installContinue } from './expect-continue.js';
import { HISTORY_BYTES_IN_FLIGHT, HistoryBudget } from './history-budget.js';
import { producerScopeOf } from './producer-scope.js';
import { RefusalCounts } from './refusal-counts.js';
import { installRequestChecks } from './request-checks.js';
import { clientRequestId, installRequestIds, requestIdGenerator } from './request-ids.js';
import { healthRoutes } from './routes/health.js';
import { historyRoutes } from './routes/history.js';
import { messageRoutes } from './routes/messages.js';
import { withPortablePatterns } from './portable-patterns.js';
import { withRequiredHeaders } from './document-headers.js';
import { withSharedSchemas } from './shared-schemas.js';
import { MAX_PATH_PARAM_LENGTH } from './schemas.js';
import { RouteMethods } from './route-methods.js';
import { installShutdown } from './shutdown.js';
import { boundPipelining, reportPipelineCloses } from './pipelining-bound.js';
import { cachedSerializers } from './schema-cache.js';
import { describeErrors, installBodyParsing } from './validation.js';
import { routeValidators } from './route-validators.js';

// Still exported from here, where their importers have always found them.
export { SHUTTING_DOWN } from './shutdown.js';
export { API_TOKEN_REFUSED } from './producer-scope.js';

/** Path of the OpenAPI document. */
export const OPENAPI_PATH = '/v1/openapi.json';

/**
 * Builds the app (not yet listening).
 * @param deps the service's parts
 * @param logger the root logger; requests log through a child
 */
export async function buildApp(deps: ApiDeps, logger: Logger): Promise<FastifyInstance> {
  // Every error answer is counted, as the route it was sent to (refusal-counts.ts).
  const counts = new RefusalCounts(deps.metrics);
  // A refusal before fastify has a request (a parser error, a 417, a CONNECT): every one
  // the client's doing, logged like a route's (`request rejected` at debug) and counted.
  const unrouted = (err: PixiuError, req: IncomingMessage | undefined): void => {
    // No fastify request, so no reqId of its own: the client's X-Request-Id, when it sent
    // one to take, read only when the line is written (debug).
    logRejected(logger, err, () => {
      const reqId = req === undefined ? undefined : clientRequestId(req);
      return reqId === undefined ? {} : { reqId };
    });
    counts.countUnrouted(err, req);
  };
  // A request's line and headers: PIXIU_HEADERS_TIMEOUT, never past the request timeout.
  const headersTimeout = Math.min(deps.config.headersTimeoutMs, deps.config.requestTimeoutMs);
  const app = Fastify({
    // pino's Logger is a FastifyBaseLogger; naming the base type keeps the instance's
    // type the default one that route modules take.
    loggerInstance: logger as FastifyBaseLogger,
    // No line per request: at thousands of messages per second that is most of the
    // log. Failures are logged by the error handler.
    logController: new LogController({ disableRequestLogging: true }),
    // Each request's id (its lines' reqId, its answer's X-Request-Id): the client's
    // X-Request-Id when it is 1 – 128 visible ASCII characters, else req-<n> (request-ids.ts).
    genReqId: requestIdGenerator(),
    bodyLimit: deps.config.maxBodyBytes,
    // `request.ip`, the `ip` of the lines about refused requests and handshakes when it is
    // an address (client-ip.ts): the TCP peer's, or with PIXIU_TRUST_PROXY the client's that
    // those proxies name in X-Forwarded-For (@fastify/proxy-addr reads it; config/trust-proxy.ts).
    ...(deps.config.trustProxy.length > 0 ? { trustProxy: [...deps.config.trustProxy] } : {}),
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
    // first onRequest hook (shutdown.ts), in the catalogue's shape, not by fastify, whose own
    // 503 body is not Pixiu's and carries no Retry-After (a contract tester's finding).
    // The first request pipelined behind the one in flight gets it after that one's answer,
    // which leaves the close to it (shutdown.ts); a request on a keep-alive connection idle as
    // draining began gets none: Node closes that connection (docs/decisions.md
    // "Shutdown drains HTTP").
    return503OnClosing: false,
    // An HTTP/1.1 request without Host is refused here (RFC 9112 §3.2), with the
    // catalogue's body, rather than by Node with an empty 400. A request's line and
    // headers must arrive within PIXIU_HEADERS_TIMEOUT (10 s), and the request timeout:
    // Node counts a connection's first request from its opening, so one that sends nothing
    // is answered 408 and closed after it, not held 60 s, then up to 15 s more (secaudit F1:
    // each such socket held a descriptor for 73 s). Idle between two requests a keep-alive
    // connection is kept fastify's 72 s (`keepAliveTimeout`), above a proxy's 60 s upstream
    // keep-alive, so that the proxy closes it first and never sends a request on a
    // connection the node is closing (docs/decisions.md "A node's bound on its sockets").
    http: {
      requireHostHeader: false,
      headersTimeout,
      connectionsCheckingInterval: Math.min(30_000, Math.floor(headersTimeout / 4)),
    },
    // A user id may be 128 code points, percent-encoded in a path; fastify's default
    // (100 characters) would refuse valid ids with its own 414 body.
    routerOptions: { maxParamLength: MAX_PATH_PARAM_LENGTH },
    // Router errors (a bad percent-encoding) answer with the catalogue's body too.
    // Refused before routing there may be no route config: the path says what it was sent to.
    frameworkErrors: frameworkErrorAnswerer((err, req) => counts.countFramework(err, req)),
    // Requests Node's HTTP parser refuses: the catalogue's body, not fastify's.
    clientErrorHandler: clientErrorAnswerer(unrouted),
    schemaErrorFormatter: (errors, dataVar) => new Error(describeErrors(dataVar, errors)),
    // Validators and response serializers compiled once per process, on first use, not
    // once per app (schema-cache.ts).
    schemaController: { compilersFactory: { buildValidator: routeValidators, buildSerializer: cachedSerializers } },
  });
  // Before anything else listens for requests: a request pipelined past a connection's
  // bounds closes it before reaching fastify (pipelining-bound.ts). Its 429, when it
  // gets one, is an error answer like the others: counted, and logged at debug.
  const reportClose = reportPipelineCloses(logger, (reason) => deps.metrics.pipelineConnectionsClosed.inc({ reason }));
  boundPipelining(app.server, (close) => {
    reportClose(close);
    if (close.answer !== undefined) unrouted(close.answer, close.req);
  });
  // Before any route is added: the routes' config says what their refusals count in.
  counts.track(app);
  // Every answer sent through fastify says its request's id (request-ids.ts).
  installRequestIds(app);
  const routeMethods = new RouteMethods();
  routeMethods.track(app);
  // Before any other onRequest hook: a draining node refuses a request before any check.
  installShutdown(app, deps.draining, (err, req) => counts.countRouted(err, req));
  installBodyParsing(app);
  // History answers in flight, node-wide (history-budget.ts); one not taken by its client
  // in time closes its connection.
  app.decorate('historyBudget', new HistoryBudget(HISTORY_BYTES_IN_FLIGHT, deps.config.historyTakeTimeoutMs,
    () => deps.metrics.historyConnectionsClosed.inc()));
  // An Expect other than 100-continue: the catalogue's 417, not Node's bare one.
  app.server.on('checkExpectation', expectationAnswerer(unrouted));
  app.server.on('connect', connectMethodAnswerer(unrouted));
  // Expect: 100-continue is answered 100 only when the body will be read.
  installContinue(app);
  installRequestChecks(app);
  installErrorHandlers(app, (err, req) => {
    counts.countRouted(err, req);
    // Only a failed Redis call: not the store, another node, a JWKS fetch or a busy node.
    if (isRedisFailure(err)) deps.metrics.redisErrors.inc({ kind: 'request' });
  }, (method, path) => routeMethods.notFoundHint(method, path));

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
        description: 'Durable real-time messaging. Producers POST messages; devices receive them over WebSocket (GET /v1/connect). Errors are {"error": {"code", "message"}}. Every answer carries X-Request-Id: the request id of the node\'s log lines, the client\'s own X-Request-Id when it sent 1–128 visible ASCII characters. No license is declared for this project.',
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
    // The id patterns' `\s\p{Cc}\p{Cs}` as ranges of \uXXXX escapes (printable ASCII, read
    // alike by ECMA-262, Python and Java), and the MsgID's whole rule where the answers'
    // schemas hold its shape (portable-patterns.ts); the headers always sent marked
    // required (document-headers.ts); then the shapes repeated across routes (the error
    // body, the message id, …) written once in components.schemas and referred to by
    // `$ref` (shared-schemas.ts), in their published form.
    transformObject: (doc) => withSharedSchemas(withRequiredHeaders(withPortablePatterns('openapiObject' in doc ? doc.openapiObject : doc.swaggerObject))),
  });

  healthRoutes(app, deps);
  // Serialized once, at its first request (every route is added by then), and sent as
  // those bytes each time: serialized per request, it cost 2 – 5 ms of the event loop
  // each (at ~150 KB, before shared-schemas.ts), and a few connections asking in a loop
  // held the node.
  let openapi: Buffer | undefined;
  app.get(OPENAPI_PATH, { schema: { hide: true } }, async (_req, reply) => {
    openapi ??= Buffer.from(JSON.stringify(app.swagger()));
    return reply.type('application/json; charset=utf-8').send(openapi);
  });

  // Producer and admin routes: the API token, checked before the body is read.
  const producerScope = producerScopeOf(app, deps.apiToken);
  await producerScope((scope) => {
    messageRoutes(scope, deps);
    historyRoutes(scope, deps);
  });
  await deps.extend?.(app, producerScope);
  return app;
}
