/**
 * Which methods a path has routes for: the not-found handler's hint when a request
 * names a route's path with another method (`POST /v1/rooms/{room}/members`, where PUT
 * adds members: a newcomer's finding, who got only "no route POST …"). The answer
 * stays 404 NOT_FOUND (docs/api.md, "Errors"); only its words say which methods the
 * path takes.
 */
import type { FastifyInstance } from 'fastify';

/** The order a 404's words list a path's methods in: reads, then writes, as docs list them. */
const METHOD_ORDER: readonly string[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** One route's method and its URL pattern cut at `/` (`:param` a whole segment, `*` the rest). */
interface RouteShape {
  readonly method: string;
  readonly segments: readonly string[];
}

/**
 * Whether `pattern` (a route's URL cut at `/`: `:param` any one segment that is not
 * empty, `*` the rest) matches a request path's `segments` (its path cut at `/`, as
 * sent). Also refusal-counts.ts's, for requests refused before routing.
 */
export function routeMatches(pattern: readonly string[], segments: readonly string[]): boolean {
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i] as string;
    if (p === '*') return true;
    const s = segments[i];
    if (s === undefined) return false;
    if (p.startsWith(':') ? s === '' : p !== s) return false;
  }
  return pattern.length === segments.length;
}

/** The routes of an app, by method and path pattern, recorded as they are added. */
export class RouteMethods {
  readonly #routes: RouteShape[] = [];

  /** Records each route `app` adds from now on (its onRoute hook). Call it before any route is added. */
  track(app: FastifyInstance): void {
    app.addHook('onRoute', (route) => {
      for (const method of [route.method].flat()) this.#routes.push({ method, segments: route.url.split('/') });
    });
  }

  /**
   * The methods with a route for `path` (a request's path, without its query), in
   * {@link METHOD_ORDER}'s order (then by name), HEAD left out (it comes with GET);
   * empty when none.
   */
  methodsFor(path: string): string[] {
    const segments = path.split('/');
    const found = new Set<string>();
    for (const route of this.#routes) {
      if (route.method !== 'HEAD' && routeMatches(route.segments, segments)) found.add(route.method);
    }
    const rank = (m: string): number => (METHOD_ORDER.includes(m) ? METHOD_ORDER.indexOf(m) : METHOD_ORDER.length);
    return [...found].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  }
}
