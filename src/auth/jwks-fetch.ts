/**
 * The fetch a JWKS is read with (jose's `customFetch`): the global fetch, with the
 * answer's body read up to {@link MAX_JWKS_BYTES}. jose reads the whole body of
 * whatever the URL answers; a 100 MB answer (a misconfigured URL, a hostile host) was
 * held in memory and parsed, taking the node to ~680 MB (a fresh tester's finding).
 *
 * Also what is said of the JWKS URL itself: {@link shownUrl}, the URL as a log may show
 * it (no credentials, no query), and the start-up warning of a plain `http://` URL to
 * another machine ({@link cleartextJwksUrl}, {@link CLEARTEXT_JWKS_LOG}: logged once by
 * src/cli/serve.ts, never refused).
 */

import { BlockList, isIP } from 'node:net';
import type { JWK } from 'jose';
import type { JwksKeyScreen } from './jwks-keys.js';

/** Largest JWKS answer read, bytes: a key set of a few dozen keys is a few KiB. */
export const MAX_JWKS_BYTES = 1024 * 1024;

/**
 * `fetch`, with a body longer than {@link MAX_JWKS_BYTES} refused.
 * @returns the response, its body read whole (so at most the cap is held)
 * @throws Error (fetch's failures, and a body over the cap, worded to follow "the JWKS
 *   URL … "): the verifier answers 503
 */
export async function cappedFetch(url: string, options: RequestInit): Promise<Response> {
  const res = await fetch(url, options);
  const declared = Number(res.headers.get('content-length') ?? '0');
  if (declared > MAX_JWKS_BYTES) {
    await res.body?.cancel();
    throw new Error(`answered ${declared} bytes, over the ${MAX_JWKS_BYTES} read`);
  }
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  const reader = res.body?.getReader();
  for (;;) {
    const next = await reader?.read();
    if (next === undefined || next.done) break;
    bytes += next.value.byteLength;
    if (bytes > MAX_JWKS_BYTES) {
      await reader?.cancel();
      throw new Error(`answered more than the ${MAX_JWKS_BYTES} bytes read`);
    }
    chunks.push(next.value);
  }
  return new Response(Buffer.concat(chunks), { status: res.status, statusText: res.statusText, headers: res.headers });
}

/**
 * {@link cappedFetch} that refuses an answer holding no keys to verify with, and
 * remembers a failed fetch: for `cooldownMs` after one it fails at once without asking
 * the URL again. jose's cooldown runs only from a fetch that succeeded, so while the
 * identity provider was down every token (each connect, each made-up `kid`) fetched
 * the set once more: hundreds of requests a second from one node to a provider
 * already failing.
 *
 * An answer that is not a 200, not a JSON key set, or a key set with no keys fails
 * with an Error naming the URL (its origin and path: credentials went in a header, a
 * query may hold a secret) and the fault, so the operator's log says "answered 404",
 * not jose's bare "Expected 200 OK". A key set with no keys is an outage, not an
 * answer: jose would put it in place of the cached set, and every token, of keys
 * that verified a moment before, was 401 (a client told its token is bad logs its
 * user out); failing the fetch keeps the cached set, and what needs a fetch is 503.
 *
 * A fetch that jose's signal ends (`timeoutMs`, its `timeoutDuration`) fails with an
 * Error named `TimeoutError` (what jose reads as its timeout) that names the URL: jose's
 * own says only "request timed out".
 *
 * The keys of an answer that cannot verify a token are left out of what jose reads
 * (`screen`, which logs each and tells the refusals why).
 *
 * @returns a fetch for jose's `customFetch`, with its own memory of the last failure
 * @throws Error when the URL cannot be read in `timeoutMs` or answers no usable key
 *   set (the verifier answers 503, the Error as its cause)
 */
export function cooledFetch(cooldownMs: number, timeoutMs: number, screen: JwksKeyScreen): (url: string, options: RequestInit) => Promise<Response> {
  let failedAt = Number.NEGATIVE_INFINITY; // performance.now() of the last failure
  let lastFault = ''; // its message, repeated while it holds
  return async (url, options) => {
    if (performance.now() - failedAt < cooldownMs) {
      throw new Error(`the JWKS could not be fetched less than ${cooldownMs} ms ago (${lastFault}); not asked again yet`);
    }
    try {
      const res = await cappedFetch(url, options).catch((err: unknown) => {
        throw new Error(`the JWKS URL ${shownUrl(url)} ${unreachable(err)}`, { cause: err });
      });
      if (res.status !== 200) throw new Error(`the JWKS URL ${shownUrl(url)} answered ${res.status}${res.statusText === '' ? '' : ` ${res.statusText}`}`);
      const text = await res.text();
      const set = readKeySet(text);
      if (typeof set === 'string') throw new Error(`the JWKS URL ${shownUrl(url)} ${set}`);
      const keys = await usableKeys(set.keys, url, screen);
      // What jose reads: the answer as it came, or without the keys left out.
      return new Response(keys.length === set.keys.length ? text : JSON.stringify({ ...set, keys }), { status: 200, headers: res.headers });
    } catch (caught) {
      let err = caught;
      if (options.signal?.aborted === true) {
        err = new Error(`the JWKS URL ${shownUrl(url)} did not answer in ${timeoutMs} ms`, { cause: caught });
        (err as Error).name = 'TimeoutError';
      }
      failedAt = performance.now();
      lastFault = err instanceof Error ? err.message : String(err);
      throw err;
    }
  };
}

/**
 * Why {@link cappedFetch} failed, worded to follow "the JWKS URL … ": fetch's own
 * failure says only "fetch failed", its cause what happened (`connect ECONNREFUSED
 * 127.0.0.1:8443`, `getaddrinfo ENOTFOUND idp.example`, a TLS error).
 */
function unreachable(err: unknown): string {
  const e = err as { message?: unknown; cause?: { message?: unknown } } | undefined;
  if (e instanceof TypeError) return `cannot be reached: ${typeof e.cause?.message === 'string' ? e.cause.message : e.message}`;
  return typeof e?.message === 'string' ? e.message : String(err);
}

/**
 * `text` read as a key set: JSON of an object with a `keys` array of objects (jose's
 * `isJwkSet`) holding at least one key.
 * @returns the set, or the fault, worded to follow "the JWKS URL … "
 */
function readKeySet(text: string): { keys: JWK[] } | string {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return 'answered no JSON';
  }
  const isObject = (o: unknown): boolean => typeof o === 'object' && o !== null && !Array.isArray(o);
  const keys = isObject(v) ? (v as { keys?: unknown }).keys : undefined;
  if (!Array.isArray(keys) || !keys.every(isObject)) return 'answered JSON that is no key set ({"keys": [...]})';
  return keys.length === 0 ? 'answered a key set with no keys' : v as { keys: JWK[] };
}

/**
 * The keys of `keys` that can verify a signature (`screen`'s judgement: jwks-keys.ts,
 * by jose's rules; each key left out is logged with its `kid` and why). jose imports a
 * key only when a token names it, so one broken key in place of a good one (same
 * `kid`) replaced the cached set and every token of that key was refused for the 10
 * minutes the set is kept (a fresh tester's finding).
 * @throws Error naming the URL when no key is left: an outage, the cached set kept
 */
async function usableKeys(keys: readonly JWK[], url: string, screen: JwksKeyScreen): Promise<JWK[]> {
  const kept = await screen.screen(keys);
  if (kept.length === 0) throw new Error(`the JWKS URL ${shownUrl(url)} answered ${keys.length} key(s), none usable to verify a signature`);
  return kept;
}

/** A URL as a log may show it: origin and path, the query (which may hold a secret) as `?…`. */
export function shownUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}${u.search === '' ? '' : '?…'}`;
  } catch {
    return '(unreadable URL)';
  }
}

/**
 * The settings-table check of `PIXIU_JWKS_URL` past its `^https?://` pattern: a value
 * the WHATWG URL parser cannot read (`https://`, no host) ended the start with only
 * Node's `Invalid URL`, naming no setting (walk38 F5).
 * @returns what is wrong, never quoting the URL (it may hold credentials); undefined when good
 */
export function jwksUrlProblem(url: string): string | undefined {
  try {
    return new URL(url).hostname === '' ? 'it names no host' : undefined;
  } catch {
    return 'it is not a URL that can be read (a host after https://, say)';
  }
}

/** The loopback addresses: 127.0.0.0/8 and ::1 (RFC 1122 §3.2.1.3, RFC 4291 §2.5.3), IPv4-mapped ones included. */
const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/**
 * The warning of a `PIXIU_JWKS_URL` that is plain `http://` to a host other than this
 * machine's loopback ({@link cleartextJwksUrl}), logged once at start (src/cli/serve.ts)
 * with the URL as {@link shownUrl} shows it. Not refused: a JWKS served over http on an
 * internal network is a set-up some run on purpose (a black-box security tester's
 * finding, walk22 F2: nothing said so before).
 */
export const CLEARTEXT_JWKS_LOG = 'PIXIU_JWKS_URL is plain http:// to a host that is not this machine: anyone on the path to it can serve their own keys '
  + 'and so mint tokens for any user, and credentials in the URL travel in clear; use https:// (README, "Set up a fresh machine")';

/**
 * Whether a JWKS URL is fetched in clear from another machine: its scheme is `http:`
 * and its host is neither `localhost` nor a loopback address (127.0.0.0/8, `::1`, as
 * the URL parser spells them: `127.1` is 127.0.0.1). Other names are not resolved: a
 * name is taken for another machine.
 * @param url the setting's value (`^https?://`, checked by loadConfig)
 * @returns false for https:, for a loopback host, and for a URL that cannot be read
 */
export function cleartextJwksUrl(url: string): boolean {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return false;
  }
  if (u.protocol !== 'http:') return false;
  const host = u.hostname.toLowerCase();
  if (host === 'localhost' || host === 'localhost.') return false;
  const address = host.replace(/^\[|\]$/g, '');
  const family = isIP(address);
  return family === 0 || !LOOPBACK.check(address, family === 6 ? 'ipv6' : 'ipv4');
}
