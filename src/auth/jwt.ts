/**
 * Client JWTs (DESIGN.md §6): `sub` is the user id, `exp` is required; optional
 * `tags` (strings, for broadcast filters) and `channels` (patterns the user may
 * subscribe to). Verified with `jose` against one key source: an HS256 secret (its
 * UTF-8 bytes), a PEM public key, or a JWKS URL. `alg: none` is never accepted.
 */
// jose's modules one by one, not its index, which loads every JWE, JWS, JWK and key
// module (~0.04 s of CPU a start needs none of): the same modules the index exports.
import { createRemoteJWKSet, customFetch } from 'jose/jwks/remote';
import * as joseErrors from 'jose/errors';
import { jwtVerify } from 'jose/jwt/verify';
import type { JWTPayload, JWTVerifyGetKey } from 'jose';
import { isUserId } from '../api/schemas.js';
import { PixiuError } from '../errors.js';
import { cooledFetch } from './jwks-fetch.js';
import { JwksKeyScreen, verifiedByEach } from './jwks-keys.js';
import type { Logger } from '../logger.js';
import type { ClientOf } from '../api/client-ip.js';
import { checkJwtForm } from './jwt-form.js';
import { NBF_TOLERANCE_SEC, TokenExpiredError, TokenRefusals, headerOf, type KeyDescription } from './jwt-refusals.js';
import { ASYMMETRIC_ALGS, readPublicKey } from './pem-key.js';
import type { JwtKeySource } from './secrets.js';

export { NBF_TOLERANCE_SEC } from './jwt-refusals.js';

/**
 * Least time between two fetches of the JWKS for a `kid` it does not hold, ms (jose's
 * `cooldownDuration`, 30 s by default). After a key rotation, tokens with the new `kid`
 * are refused until the next fetch: 1 s keeps that window short, while a stream of
 * tokens with made-up `kid`s costs the identity provider at most one request a second
 * per node (jose also shares one fetch between concurrent verifications).
 */
export const JWKS_COOLDOWN_MS = 1000;

/**
 * How long a fetched JWKS is used before it is fetched again, ms (jose's
 * `cacheMaxAge`, its default): a key removed from the JWKS keeps verifying until then.
 */
export const JWKS_CACHE_MAX_AGE_MS = 10 * 60 * 1000;

/**
 * How long a JWKS fetch may take, body included, before it is an outage (503), ms
 * (jose's `timeoutDuration`, its default).
 */
export const JWKS_TIMEOUT_MS = 5000;

/**
 * The latest expiry a token is taken to have, ms since the epoch: the last time a
 * JavaScript `Date` can hold (ECMA-262 §21.4.1.1, 8.64e15 ms: the year 275760). A later
 * finite `exp` (`1e300`: "never") is accepted as this time, so a token's expiry is
 * always a real time: `exp` × 1000 of an `exp` above ~1.8e305 is Infinity, what
 * {@link checkFiniteTimes} refuses. Nothing waits on it with a timer (the connection
 * clock compares times, src/gateway/connection-clock.ts), so it arms no overflowing one.
 */
export const MAX_EXPIRES_AT_MS = 8.64e15;

/** The claims Pixiu reads from a verified client token. */
export interface ClientClaims {
  /** The user id (`sub`). */
  readonly user: string;
  /** Expiry, ms since the epoch (`exp` × 1000), at most {@link MAX_EXPIRES_AT_MS}. */
  readonly expiresAtMs: number;
  /** Broadcast filter tags; empty when absent. */
  readonly tags: readonly string[];
  /**
   * Channel patterns the user may subscribe to; undefined when the token has no
   * `channels` claim (it may follow no channel, as with `[]`, and a refused `sub` says
   * the claim is missing: the first thing an integrator leaves out).
   */
  readonly channels: readonly string[] | undefined;
}

/**
 * Verifies a compact JWT and returns its claims; `client` reads the request's `reqId`
 * and the client's address (src/api/client-ip.ts) for the warning of a token refused as
 * not for the node's key, and only then: an accepted token, the common case, costs no
 * read (with PIXIU_TRUST_PROXY each is a parse of X-Forwarded-For).
 */
export interface TokenVerifier {
  (token: string, client?: ClientOf): Promise<ClientClaims>;
  /**
   * A JWKS key source's only: fetches the set now (the start does, so that a wrong
   * `PIXIU_JWKS_URL` is in the log at once, not at the first client), as the first
   * token would.
   * @returns how many keys of the set can verify a token
   * @throws Error naming the URL and the fault (as a 503's cause says it)
   */
  readonly prefetch?: () => Promise<number>;
}

/** Claims checked beside the signature when configured (`PIXIU_JWT_AUDIENCE`, `PIXIU_JWT_ISSUER`). */
export interface VerifierOptions {
  /** The `aud` a token must hold (a string equal to it, or an array containing it). */
  readonly audience?: string;
  /** The `iss` a token must have. */
  readonly issuer?: string;
  /**
   * Told each time a token is refused UNAVAILABLE because the keys to verify it cannot
   * be had (the JWKS unreachable, timed out, not a key set): a metric, as `/readyz` does
   * not look at the key source.
   */
  readonly onKeysUnavailable?: () => void;
  /**
   * Where a token refused as not for the node's key is logged at warn (jwt-refusals.ts:
   * BAD_SIGNATURE_LOG for its signature, KEY_REFUSED_LOG for its `alg` or `kid`; each
   * at most one line per 10 s, with `notLogged`), never the token; and, a JWKS's, each
   * key of a fetched set that cannot verify tokens, once (jwks-keys.ts
   * JWKS_KEY_LEFT_OUT_LOG); none when absent.
   */
  readonly logger?: Logger;
}

/** jose's codes for a JWKS that could not be fetched or read (503, not 401). */
const JWKS_FAULTS: ReadonlySet<string> = new Set(['ERR_JWKS_TIMEOUT', 'ERR_JOSE_GENERIC', 'ERR_JWKS_INVALID']);

/**
 * Where each key source comes from, as a refusal names it (jwt-refusals.ts): a secret
 * is PIXIU_JWT_SECRET's, or the one a node given no key generates in its data dir.
 */
const SETTING_OF: Readonly<Record<JwtKeySource['kind'], string>> = {
  secret: "PIXIU_JWT_SECRET or the data dir's jwt-secret",
  'public-key': 'PIXIU_JWT_PUBLIC_KEY',
  jwks: 'PIXIU_JWKS_URL',
};

/** The time claims (RFC 7519 §4.1.4 – §4.1.6) a token must hold as finite numbers when present. */
const TIME_CLAIMS = ['exp', 'nbf', 'iat'] as const;

/** The one answer to any `sub` that is not a user id (docs/protocol.md). */
const BAD_SUB = "the token's sub is not a valid user id";

function stringArray(v: unknown, claim: string): string[] {
  if (v === undefined) return [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) {
    throw new PixiuError('UNAUTHORIZED', `invalid token: claim "${claim}" must be an array of strings`);
  }
  return v as string[];
}

/**
 * Refuses a signed payload whose `exp`, `nbf` or `iat` is present and not a finite
 * number (JSON's `1e400` parses to ±Infinity). Run on every payload whose signature
 * held, also one jose refused on its own claim checks: an `nbf` of Infinity is "not
 * yet valid" to jose, and an `exp` of -Infinity "expired", which sent an operator to
 * the clocks; the answer is the one docs/protocol.md gives (Client tokens).
 * @throws PixiuError UNAUTHORIZED `invalid token: "<claim>" is not a finite number`
 */
function checkFiniteTimes(payload: JWTPayload): void {
  for (const claim of TIME_CLAIMS) {
    const value = payload[claim];
    if (value !== undefined && !Number.isFinite(value)) throw new PixiuError('UNAUTHORIZED', `invalid token: "${claim}" is not a finite number`);
  }
}

/**
 * Turns a verified payload into {@link ClientClaims}, checking the claim shapes.
 * @throws PixiuError UNAUTHORIZED: a `sub` that is no user id, a missing `exp`, a time
 *   claim that is not a finite number (JSON's `1e400` parses to Infinity: an `exp` that
 *   never comes), or {@link TokenExpiredError} when `exp` is not after now (jose was given a
 *   tolerance for `nbf` that also loosens `exp`; here it is strict again)
 */
function toClaims(payload: JWTPayload): ClientClaims {
  // The rule every user id follows (docs/decisions.md): a lone surrogate would become
  // U+FFFD in UTF-8 and read another user's inbox; whitespace, control characters and
  // over-long ids could never be posted to. A non-string or empty `sub` is no user id either.
  if (typeof payload.sub !== 'string' || !isUserId(payload.sub)) throw new PixiuError('UNAUTHORIZED', BAD_SUB);
  if (typeof payload.exp !== 'number') throw new PixiuError('UNAUTHORIZED', 'invalid token: "exp" is required');
  checkFiniteTimes(payload);
  // jose's rule without its tolerance: expired once `exp` <= now, in whole seconds.
  if (payload.exp <= Math.floor(Date.now() / 1000)) throw new TokenExpiredError(payload.exp);
  return {
    user: payload.sub,
    expiresAtMs: Math.min(payload.exp * 1000, MAX_EXPIRES_AT_MS),
    tags: stringArray(payload.tags, 'tags'),
    channels: payload.channels === undefined ? undefined : stringArray(payload.channels, 'channels'),
  };
}

/**
 * The URL a JWKS is fetched from and the headers it is fetched with: credentials in
 * the URL (`https://user:password@idp/jwks`) go in an `Authorization: Basic` header.
 * fetch refuses a URL holding them, with an error quoting the whole URL, password
 * included, which was logged at every connect. Redirects are not followed, so the
 * header goes to no other host.
 */
function jwksRequest(raw: string): { url: URL; headers: Record<string, string> } {
  const url = new URL(raw);
  if (url.username === '' && url.password === '') return { url, headers: {} };
  const basic = Buffer.from(`${decodeOrKeep(url.username)}:${decodeOrKeep(url.password)}`).toString('base64');
  url.username = '';
  url.password = '';
  return { url, headers: { authorization: `Basic ${basic}` } };
}

/** A URL's percent-encoded user or password, decoded; as written when it is no valid encoding (`%zz`). */
function decodeOrKeep(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

/**
 * Builds the verifier for a key source. `nbf` may be up to {@link NBF_TOLERANCE_SEC}
 * in the future; `exp` is strict. A JWKS is fetched on first use, again after
 * {@link JWKS_CACHE_MAX_AGE_MS}, and for an unknown `kid` at most every
 * {@link JWKS_COOLDOWN_MS}.
 *
 * @param opts the `aud` and `iss` a token must carry, when set
 * @returns a function that resolves the claims, or rejects with PixiuError
 *   UNAUTHORIZED (`token expired: …`, a jwt-refusals.ts TokenExpiredError, or `invalid token: …` saying what is wrong, no
 *   detail of the key: jwt-refusals.ts's TokenRefusals — a bad signature, an `alg` the
 *   key does not take, a `kid` the JWKS lacks or a left-out key of it names (one that
 *   cannot verify tokens: jwks-keys.ts), logged thinned to `opts.logger`; a token
 *   not of the written form of jwt-form.ts's checkJwtForm — compact, canonical
 *   base64url, JSON without a byte order mark — is refused unverified, with its hint), or
 *   UNAVAILABLE when the JWKS cannot be fetched or read (unreachable, timed out, not
 *   a 200, not a JSON key set, a key set with no keys)
 * @throws Error when a PEM key cannot be read or is of no accepted type (loadConfig
 *   refuses such a key first, naming PIXIU_JWT_PUBLIC_KEY)
 */
export function createVerifier(source: JwtKeySource, opts: VerifierOptions = {}): TokenVerifier {
  let key: JWTVerifyGetKey;
  let algorithms: readonly string[];
  let prefetch: (() => Promise<number>) | undefined;
  let keySet: KeyDescription['keySet'];
  let leftOut: KeyDescription['leftOut'];
  switch (source.kind) {
    case 'secret':
      {
        const secret = new TextEncoder().encode(source.secret);
        key = async () => secret;
      }
      algorithms = ['HS256'];
      break;
    case 'public-key': {
      const read = readPublicKey(source.pem);
      key = async () => read.key;
      algorithms = read.algorithms;
      break;
    }
    case 'jwks': {
      const { url, headers } = jwksRequest(source.url);
      algorithms = Object.values(ASYMMETRIC_ALGS).flat();
      const screen = new JwksKeyScreen(algorithms, opts.logger);
      const remote = createRemoteJWKSet(url, {
        cooldownDuration: JWKS_COOLDOWN_MS, cacheMaxAge: JWKS_CACHE_MAX_AGE_MS, timeoutDuration: JWKS_TIMEOUT_MS,
        [customFetch]: cooledFetch(JWKS_COOLDOWN_MS, JWKS_TIMEOUT_MS, screen), headers,
      });
      key = async (header, token) => {
        try {
          return await remote(header, token);
        } catch (err) {
          // jose passes on what cooledFetch threw for a failed fetch (unreachable, or
          // refused again within the cooldown): the key source is down, which is no
          // fault of the token (401).
          if (err instanceof joseErrors.JOSEError) throw err;
          throw new PixiuError('UNAVAILABLE', 'cannot fetch the keys to verify the token, retry later', { cause: err });
        }
      };
      prefetch = async () => {
        try {
          await remote.reload();
        } catch (err) {
          throw jwksFault(err);
        }
        return remote.jwks()?.keys.length ?? 0;
      };
      keySet = () => remote.jwks()?.keys;
      leftOut = (kid) => screen.reasonFor(kid);
      break;
    }
  }
  const checks = {
    algorithms: [...algorithms],
    requiredClaims: ['exp', 'sub'],
    clockTolerance: NBF_TOLERANCE_SEC,
    ...(opts.audience !== undefined ? { audience: opts.audience } : {}),
    ...(opts.issuer !== undefined ? { issuer: opts.issuer } : {}),
  };
  const verify = async (token: string, client?: ClientOf): Promise<ClientClaims> => {
    checkJwtForm(token);
    try {
      return await verified(token, client);
    } catch (err) {
      if (err instanceof PixiuError && err.code === 'UNAVAILABLE') opts.onKeysUnavailable?.();
      throw err;
    }
  };
  const refusals = new TokenRefusals({
    setting: SETTING_OF[source.kind], algorithms, ...(keySet !== undefined ? { keySet } : {}), ...(leftOut !== undefined ? { leftOut } : {}),
  }, opts.logger);
  const verified = async (token: string, client: ClientOf | undefined): Promise<ClientClaims> => {
    try {
      const { payload } = await jwtVerify(token, key, checks).catch((err: unknown) => {
        // Several different keys of the JWKS under the `kid` the token names: each is
        // tried (jwks-keys.ts). A token naming no `kid` is refused (jwt-refusals.ts).
        if (err instanceof joseErrors.JWKSMultipleMatchingKeys && typeof headerOf(token).kid === 'string') return verifiedByEach(token, err, checks);
        throw err;
      });
      return toClaims(payload);
    } catch (err) {
      if (err instanceof PixiuError) throw err;
      // jose checks the claims only once the signature holds, so the payload it refused
      // is signed: a time claim that is no finite number is answered as such first.
      if (err instanceof joseErrors.JWTExpired || err instanceof joseErrors.JWTClaimValidationFailed) checkFiniteTimes(err.payload);
      // The JWKS timed out, answered no 200, or held no key set (not JSON: generic;
      // JSON of another shape: ERR_JWKS_INVALID): the key source is at fault, not the token.
      if (err instanceof joseErrors.JOSEError && JWKS_FAULTS.has(err.code)) {
        throw new PixiuError('UNAVAILABLE', 'cannot fetch the keys to verify the token, retry later', { cause: jwksFault(err) });
      }
      throw refusals.of(err, token, client);
    }
  };
  return prefetch === undefined ? verify : Object.assign(verify, { prefetch });
}


/**
 * What a failed JWKS fetch says of itself: jose's timeout says only "request timed
 * out", its cause (cooledFetch's) names the URL; any other failure is its own.
 */
function jwksFault(err: unknown): unknown {
  return err instanceof joseErrors.JWKSTimeout && err.cause instanceof Error ? err.cause : err;
}
