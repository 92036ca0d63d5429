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
   * empty when none. Of the routes that match, only the most specific pattern's count
   * ({@link specificity}): `/v1/messages/batch` takes POST, though `GET
   * /v1/messages/:id` matches it too (with id `batch`, a 400).
   */
  methodsFor(path: string): string[] {
    const segments = path.split('/');
    const found = new Set<string>();
    let best: string | undefined;
    for (const route of this.#routes) {
      if (route.method === 'HEAD' || !routeMatches(route.segments, segments)) continue;
      const rank = specificity(route.segments);
      if (best === undefined || rank < best) {
        best = rank;
        found.clear();
      }
      if (rank === best) found.add(route.method);
    }
    const rank = (m: string): number => (METHOD_ORDER.includes(m) ? METHOD_ORDER.indexOf(m) : METHOD_ORDER.length);
    return [...found].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  }
}

/**
 * How specific a route's pattern is, as a string that sorts the more specific first:
 * per segment `0` for a literal, `1` for a `:param`, `2` for `*`. Of two patterns that
 * match one path, the first segment where they differ decides, a literal winning, as
 * the router tries a literal segment before a parameter.
 */
function specificity(pattern: readonly string[]): string {
  return pattern.map((p) => (p === '*' ? '2' : p.startsWith(':') ? '1' : '0')).join('');
}
