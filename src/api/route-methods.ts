/**
 * Which methods a path has routes for: the not-found handler's hint when a request
 * names a route's path with another method (`POST /v1/rooms/{room}/members`, where PUT
 * adds members: a newcomer's finding, who got only "no route POST …"). The answer
 * stays 404 NOT_FOUND (docs/api.md, "Errors"); only its words say which methods the
 * path takes — or, for a path with an empty segment (`POST /v1/users//messages`, an id
 * left out), that it has one, and the path it most likely meant.
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
 * @param emptyParams let a `:param` match an empty segment too, as fastify's router
 *   does (`GET /v1/users//messages` reaches its route, refused 400 "params/uid must
 *   not be empty")
 */
export function routeMatches(pattern: readonly string[], segments: readonly string[], emptyParams = false): boolean {
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i] as string;
    if (p === '*') return true;
    const s = segments[i];
    if (s === undefined) return false;
    if (p.startsWith(':') ? s === '' && !emptyParams : p !== s) return false;
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
    return this.#mostSpecific(path.split('/'), false).methods;
  }

  /**
   * What a 404 of `method` on `path` (without its query) adds to "no route METHOD PATH"
   * (error-handler.ts): the path's other methods, `: this path takes GET, PUT`; for a
   * path none matches that has an empty segment (`//`, or a `/` at its end), that, and
   * the path it most likely meant: the path without its empty segments when a route
   * has it (`: the path ends in "/"; /v1/messages takes POST`), else the route whose
   * parameter sits there (`: the path has an empty segment where
   * /v1/users/{uid}/messages has {uid}; that path takes GET`). Else nothing.
   */
  notFoundHint(method: string, path: string): string {
    const others = this.methodsFor(path).filter((m) => m !== method);
    if (others.length > 0) return `: this path takes ${others.join(', ')}`;
    const segments = path.split('/');
    const empty = segments.indexOf('', 1);
    if (path === '/' || empty < 0) return '';
    const what = empty === segments.length - 1 ? 'ends in "/"' : 'has an empty segment ("//")';
    const meant = `/${segments.filter((s) => s !== '').join('/')}`;
    const takes = this.methodsFor(meant);
    if (takes.length > 0) return `: the path ${what}; ${meant} takes ${takes.join(', ')}`;
    const like = this.#mostSpecific(segments, true);
    const param = like.pattern?.[empty];
    const methods = like.methods.filter((m) => m !== method);
    if (like.pattern === undefined || param?.startsWith(':') !== true || methods.length === 0) return `: the path ${what}`;
    const shown = (p: string): string => (p.startsWith(':') ? `{${p.slice(1)}}` : p);
    return `: the path ${what} where ${like.pattern.map(shown).join('/')} has ${shown(param)}; that path takes ${methods.join(', ')}`;
  }

  /**
   * The routes matching `segments` ({@link routeMatches}) of the most specific pattern
   * ({@link specificity}): that pattern, and their methods in {@link METHOD_ORDER}'s
   * order (then by name), HEAD left out; none when no route matches.
   */
  #mostSpecific(segments: readonly string[], emptyParams: boolean): { pattern?: readonly string[]; methods: string[] } {
    const found = new Set<string>();
    let best: { rank: string; pattern: readonly string[] } | undefined;
    for (const route of this.#routes) {
      if (route.method === 'HEAD' || !routeMatches(route.segments, segments, emptyParams)) continue;
      const rank = specificity(route.segments);
      if (best === undefined || rank < best.rank) {
        best = { rank, pattern: route.segments };
        found.clear();
      }
      if (rank === best.rank) found.add(route.method);
    }
    const rank = (m: string): number => (METHOD_ORDER.includes(m) ? METHOD_ORDER.indexOf(m) : METHOD_ORDER.length);
    return { ...(best !== undefined ? { pattern: best.pattern } : {}), methods: [...found].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b)) };
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
