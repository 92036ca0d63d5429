/**
 * Which counters an HTTP error answer counts in (docs/api.md, "GET /metrics"): every one
 * in `pixiu_http_errors_total` by its code; on an ingest route (route config
 * `ingestRoute`) in `pixiu_ingest_messages_total` too, and on `GET /v1/connect`
 * (`wsHandshake`) in `pixiu_ws_handshakes_total`, whatever refused the request (both
 * flags are declared in metrics.ts). The routes' own config is the one place that says
 * what counts: a request refused before fastify routed it (a client error, a 417, a
 * CONNECT, a bad percent-encoding) is matched by its method and path against the routes
 * as they were added. A HEAD request is neither a handshake nor a message, routed or
 * not: it counts in `pixiu_http_errors_total` only, although the HEAD route fastify adds
 * beside `GET /v1/connect` carries that route's config.
 */
import type { IncomingMessage } from 'node:http';
import type { FastifyContextConfig, FastifyInstance, FastifyRequest } from 'fastify';
import type { PixiuError } from '../errors.js';
import type { Metrics } from './metrics.js';
import { routeMatches } from './route-methods.js';
import { boundRefusal } from '../gateway/handshake-refusals.js';

/** What a route's refusals count in besides `pixiu_http_errors_total` (its route config). */
export type CountedAs = Pick<FastifyContextConfig, 'ingestRoute' | 'wsHandshake'> | undefined;

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

/** Counts an app's error answers in the metrics, by the route each was sent to. */
export class RefusalCounts {
  readonly #metrics: Metrics;
  /** The routes whose refusals count beyond `pixiu_http_errors_total`, recorded as they are added ({@link track}). */
  readonly #routes: CountedRoute[] = [];

  constructor(metrics: Metrics) {
    this.#metrics = metrics;
  }

  /**
   * Records, from `app`'s onRoute hook, each route added from now on whose config names
   * `ingestRoute` or `wsHandshake`. Call it before any route is added.
   */
  track(app: FastifyInstance): void {
    app.addHook('onRoute', (route) => {
      const { ingestRoute, wsHandshake } = route.config ?? {};
      if (ingestRoute === undefined && wsHandshake !== true) return;
      // Not the HEAD route fastify adds beside a GET one: a HEAD request is no handshake.
      for (const method of [route.method].flat()) {
        if (method !== 'HEAD') this.#routes.push({ method, segments: route.url.split('/'), config: { ingestRoute, wsHandshake } });
      }
    });
  }

  /**
   * Counts an error answer in `pixiu_http_errors_total`; on `POST /v1/messages`,
   * `/v1/broadcast` and `/v1/channels/{channel}/publish` (route config `ingestRoute`),
   * in `pixiu_ingest_messages_total` by its code too: a refused request there is one
   * refused message, whatever refused it (a batch counts its items itself: its route has
   * no `ingestRoute`); on `GET /v1/connect` (`wsHandshake`), in
   * `pixiu_ws_handshakes_total` by its code. A HEAD request counts in neither: it
   * cannot be upgraded (RFC 6455 §4.1: the handshake is a GET), and the HEAD route
   * fastify adds beside `GET /v1/connect` has that route's config, token checks and all
   * (docs/api.md, "GET /metrics": handshakes on `GET /v1/connect`).
   * @param req the request answered, routed: its route's config says what else it counts in
   */
  countRouted(err: PixiuError, req: FastifyRequest): void {
    this.#count(err, req.method === 'HEAD' ? undefined : req.routeOptions.config);
  }

  /**
   * Counts an error answered before fastify routed the request (a client error, a 417, a
   * CONNECT) as the route it was sent to ({@link countedAs}).
   * @param req the request answered; undefined when the answer is to bytes that are none
   */
  countUnrouted(err: PixiuError, req: IncomingMessage | undefined): void {
    this.#count(err, this.#countedAs(req));
  }

  /**
   * Counts an error of fastify's router (fastify's `frameworkErrors`): by the route
   * config when it names what a refusal counts as, else by what the path says (refused
   * before routing there may be no route config).
   */
  countFramework(err: PixiuError, req: FastifyRequest): void {
    const config: CountedAs = req.routeOptions?.config;
    if (config?.ingestRoute !== undefined || config?.wsHandshake === true) this.countRouted(err, req);
    else this.#count(err, this.#countedAs(req.raw));
  }

  /** Counts `err` in `pixiu_http_errors_total`, and in what `route` (a route's config, or none) says besides. */
  #count(err: PixiuError, route: CountedAs): void {
    this.#metrics.httpErrors.inc({ code: err.code });
    if (route?.ingestRoute !== undefined) this.#metrics.countIngest(route.ingestRoute, err.code);
    // A handshake refused for the node's bound of handshakes in progress (`busy`), or of
    // its connections (`full`), is told apart from Redis's 503s.
    if (route?.wsHandshake === true) this.#metrics.countHandshake(boundRefusal(err) ?? err.code);
  }

  /**
   * What a request refused before fastify routed it counts as, read from its method and
   * path: the config of the route it was sent to, matched segment by segment as sent
   * (not decoded: a bad percent-encoding is one of the refusals counted); undefined
   * when none.
   */
  #countedAs(req: IncomingMessage | undefined): CountedAs {
    const path = req?.url?.split('?')[0];
    if (path === undefined) return undefined;
    const segments = path.split('/');
    return this.#routes.find((r) => r.method === req?.method && routeMatches(r.segments, segments))?.config;
  }
}
