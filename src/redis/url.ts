/**
 * `PIXIU_REDIS_URL`: the forms it takes, how it becomes ioredis's connection options,
 * and how it is shown in messages and logs (never with its password).
 *
 * Forms (docs/decisions.md, "Redis URL"):
 * - `redis://[[user]:password@]host[:port][/db][?option=value&…]`, and `rediss://…`
 *   for TLS, read by ioredis as they are; its query options (`password`, `username`,
 *   `family`, …) become client options.
 * - `unix://[[user]:password@]/path/to/redis.sock[?db=N&password=…]`: a socket path,
 *   percent-decoded, with the same credentials and query options.
 */
import type { RedisOptions } from 'ioredis';

/** What {@link redisTarget} answers: a URL ioredis parses itself, or its options. */
export type RedisTarget = string | RedisOptions;

/** A URL that cannot be read; its message says why without the URL's secrets. */
export class RedisUrlError extends Error {
  override readonly name = 'RedisUrlError';
}

const SCHEME = /^(rediss?|unix):\/\//i;

/**
 * The connection target of a Redis URL, for `new Redis(target)` or
 * `new Redis({...options, ...target})`.
 *
 * @param url a URL of one of the module's forms
 * @throws RedisUrlError naming what is wrong (the scheme, a port, a percent-encoding,
 *   a missing socket path or host), never quoting the URL
 */
export function redisTarget(url: string): RedisTarget {
  const scheme = SCHEME.exec(url)?.[1]?.toLowerCase();
  if (scheme === undefined) throw new RedisUrlError('the scheme must be redis://, rediss:// or unix://');
  if (scheme === 'unix') return unixTarget(url.slice('unix://'.length));
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new RedisUrlError('it is not a URL that can be read (check the host, the port and that special characters in the password are percent-encoded)');
  }
  if (parsed.hostname === '') throw new RedisUrlError('it names no host');
  decoded(parsed.username, 'the user name');
  decoded(parsed.password, 'the password');
  const db = parsed.pathname.replace(/^\//, '');
  if (db !== '' && !/^\d{1,5}$/.test(db)) throw new RedisUrlError('the path must be a database number, like /0');
  return url;
}

/**
 * What is wrong with a Redis URL, in words that never quote it; undefined when it
 * can be used ({@link redisTarget} accepts it).
 */
export function redisUrlProblem(url: string): string | undefined {
  try {
    redisTarget(url);
    return undefined;
  } catch (err) {
    if (err instanceof RedisUrlError) return err.message;
    throw err;
  }
}

/**
 * The URL as it may be shown: the password of its user part (or the whole user part
 * when it has no `:`, which ioredis may send as a credential) and the value of a
 * `password` query option replaced by `***`. The user part runs to the authority's last
 * `@`: a password may hold an `@` written as is (`redis://:p@ss@host`), which the URL is
 * read with, and a cut at the first one logged the rest of it. A `unix://` URL's user
 * part runs to its last `@/` ({@link unixAuthEnd}); one with an `@` but no `@/` is shown
 * as `unix://***`.
 */
export function redactUrl(url: string): string {
  return withoutCredentials(url).replace(/([?&]password=)[^&#]*/gi, '$1***');
}

/** A URL's user part as it may be shown: `user:***`, or `***` when it has no `:`. */
function shownAuth(auth: string): string {
  const colon = auth.indexOf(':');
  return colon === -1 ? '***' : `${auth.slice(0, colon)}:***`;
}

/** `url` with its user part as {@link shownAuth} shows it ({@link redactUrl}); the query as it is. */
function withoutCredentials(url: string): string {
  if (/^unix:\/\//i.test(url)) {
    const scheme = url.slice(0, 'unix://'.length);
    const rest = url.slice(scheme.length);
    const at = unixAuthEnd(rest);
    if (Number.isNaN(at)) return `${scheme}***`;
    return at === -1 ? url : `${scheme}${shownAuth(rest.slice(0, at))}${rest.slice(at)}`;
  }
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)([^/?#]*)@/i, (_m, scheme: string, auth: string) => `${scheme}${shownAuth(auth)}@`);
}

/**
 * The `unix://` URL of a socket path, each segment percent-encoded, so that a path
 * with `%`, `?`, `#` or `@` in it (a data dir's) comes back whole from {@link redisTarget}.
 * @param socketPath an absolute path
 */
export function unixUrl(socketPath: string): string {
  return `unix://${socketPath.split('/').map(encodeURIComponent).join('/')}`;
}

/**
 * Where the credentials of a `unix://` URL end, in `rest` (what follows the scheme): the
 * index of their `@`, -1 when it has none (it starts with the socket path's `/`, or holds
 * no `@`), or NaN when it holds an `@` but no `@/` (credentials with no absolute socket
 * path after them: nothing can be shown of it). The socket path is absolute, so the
 * credentials end at the last `@/`: a password may hold `@`, `/`, `?` or `#` written as
 * is (a generated one often holds `/`), and a cut at the first `@` or `/` read part of
 * it as the socket path, which a failed connect's error then quoted.
 */
function unixAuthEnd(rest: string): number {
  if (rest.startsWith('/') || !rest.includes('@')) return -1;
  const at = rest.lastIndexOf('@/');
  return at === -1 ? Number.NaN : at;
}

/** `unix://` after the scheme: `[[user]:password@]/path[?query]`. */
function unixTarget(rest: string): RedisOptions {
  let auth: string | undefined;
  let tail = rest;
  const at = unixAuthEnd(rest);
  if (Number.isNaN(at)) throw new RedisUrlError('a unix:// URL needs the socket path, an absolute one, after the @ of its credentials, like unix://:password@/var/run/redis.sock');
  if (at !== -1) {
    auth = rest.slice(0, at);
    tail = rest.slice(at + 1);
  }
  const q = tail.indexOf('?');
  const path = decoded(q === -1 ? tail : tail.slice(0, q), 'the socket path');
  if (path === '') throw new RedisUrlError('a unix:// URL needs the socket path, like unix:///var/run/redis.sock');
  const options: Record<string, unknown> = {};
  if (q !== -1) {
    for (const [key, value] of new URLSearchParams(tail.slice(q + 1))) options[key] = value;
  }
  if (options.db !== undefined) {
    if (typeof options.db !== 'string' || !/^\d{1,5}$/.test(options.db)) throw new RedisUrlError('db must be a database number, like ?db=0');
    options.db = Number(options.db);
  }
  if (auth !== undefined) {
    const colon = auth.indexOf(':');
    options.username = decoded(colon === -1 ? auth : auth.slice(0, colon), 'the user name');
    if (colon !== -1) options.password = decoded(auth.slice(colon + 1), 'the password');
  }
  return { ...options, path };
}

/** `text` percent-decoded. @throws RedisUrlError naming `what` when it is not valid percent-encoding */
function decoded(text: string, what: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new RedisUrlError(`${what} has a % that does not start a valid percent-encoding (write % as %25)`);
  }
}
