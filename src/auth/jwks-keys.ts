/**
 * Which keys of a fetched JWKS can verify a token, judged by jose's own rules when the
 * set is read: a key jose would refuse when a token names it (an RSA key under 2048
 * bits, a curve it lacks, a secret, a private key, `use: enc`, `key_ops` without
 * `verify`, a malformed member) is left out, logged once at warn with its `kid` and
 * why, and a token naming it is told why (src/auth/jwt-refusals.ts `kidCannotVerify`).
 * Before, such a key was dropped without a word (a token naming it read "not in the
 * JWKS … a key rotated out"), or kept and refused only at the token: a bare
 * "invalid token" (RSA under 2048 bits), a 503 (a private key: jose's
 * `JWKSInvalid`) — the key set's fault, answered as the client's.
 *
 * A key listed twice under one `kid` (the same key, with or without `alg`: some
 * identity providers and hand-merged sets publish it so) is kept once; two different
 * keys under one `kid` are both kept, logged at warn, and a token naming that `kid` is
 * verified against each in turn ({@link verifiedByEach}, jose's documented way with
 * `JWKSMultipleMatchingKeys`). Before, either made every token naming the `kid` 401 "it
 * names no kid", with nothing logged (a black-box security tester's finding, walk22 F5).
 */
// jose's modules one by one, not its index (jwt.ts says why).
import { compactVerify } from 'jose/jws/compact/verify';
import { createLocalJWKSet } from 'jose/jwks/local';
import { jwtVerify } from 'jose/jwt/verify';
import * as joseErrors from 'jose/errors';
import type { JWK, JWTVerifyOptions, JWTVerifyResult } from 'jose';
import type { Logger } from '../logger.js';
import { cutText, quotedText } from '../text-cut.js';
import { ASYMMETRIC_ALGS, MIN_RSA_BITS } from './pem-key.js';

/**
 * The warning of a key of the JWKS left out (it cannot verify tokens). Fields: `kid`
 * (cut to 64 characters; `index`, the key's place in the set from 0, when it has no
 * string `kid`) and `reason` (as a token naming it is told). Logged once per fetch
 * that leaves the key out anew or for another reason, not per token.
 */
export const JWKS_KEY_LEFT_OUT_LOG = 'a key of the JWKS cannot verify tokens and is left out: the key set at PIXIU_JWKS_URL needs fixing (docs/protocol.md, "Client tokens")';

/**
 * The warning of a `kid` that two or more different keys of a fetched JWKS share. Fields:
 * `kid` (cut to 64 characters) and `keys`, how many different keys carry it. Logged
 * once per fetch that finds it anew, not per token. A token naming the `kid` is tried
 * with each key in turn, so a rollover that publishes a new key under the old `kid`
 * keeps both keys' tokens working; the set is still the identity provider's to fix.
 */
export const JWKS_KID_SHARED_LOG = 'several different keys of the JWKS share one kid: a token naming it is verified against each in turn; the key set at PIXIU_JWKS_URL needs fixing, a kid per key (docs/protocol.md, "Client tokens")';

/** Most characters of a key's `kid`, `alg`, `crv` … that a reason or a warning repeats. */
const MAX_MEMBER_SHOWN = 64;

/** The JWS algorithm of each EC curve (RFC 7518 §3.4): an EC key verifies that one alone. */
const EC_CURVE_ALG: Readonly<Record<string, string>> = { 'P-256': 'ES256', 'P-384': 'ES384', 'P-521': 'ES512' };

/** The members of each key type that carry its public key, base64url (RFC 7518 §6.2.1, §6.3.1; RFC 8037 §2). */
const KEY_DATA: Readonly<Record<string, readonly string[]>> = { RSA: ['n', 'e'], EC: ['x', 'y'], OKP: ['x'] };

/** The members only a private key has (RFC 7518 §6.2.2, §6.3.2; RFC 8037 §2). */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'priv'] as const;

/** Unpadded base64url (RFC 7515 §2), at least one character. */
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** A member's value as a reason repeats it: quoted, escaped and cut (text-cut.ts). */
function shown(value: unknown): string {
  return quotedText(value, MAX_MEMBER_SHOWN);
}

/** Bits of an RSA modulus given as base64url (its leading zero bytes not counted). */
function modulusBits(n: string): number {
  const bytes = Buffer.from(n, 'base64url');
  let i = 0;
  while (i < bytes.length && bytes[i] === 0) i += 1;
  return i === bytes.length ? 0 : (bytes.length - i - 1) * 8 + (32 - Math.clz32(bytes[i] as number));
}

/**
 * The algorithms, of those the verifier takes, that a key of `key`'s type (and curve)
 * could verify with, its own `alg` aside.
 * @returns the list, or why the type or curve has none
 */
function algorithmsOfType(key: JWK, algorithms: readonly string[]): readonly string[] | string {
  const taken = (list: readonly string[]): string[] => list.filter((alg) => algorithms.includes(alg));
  switch (key.kty) {
    case 'RSA':
      return taken(ASYMMETRIC_ALGS.rsa ?? []);
    case 'EC': {
      const alg = typeof key.crv === 'string' ? EC_CURVE_ALG[key.crv] : undefined;
      return alg === undefined ? `EC on curve ${shown(key.crv)}, none of P-256, P-384, P-521` : taken([alg]);
    }
    case 'OKP':
      return key.crv === 'Ed25519' ? taken(ASYMMETRIC_ALGS.ed25519 ?? []) : `OKP on curve ${shown(key.crv)}, not Ed25519`;
    case 'oct':
      return 'a secret, kty "oct": a JWKS verifies public-key signatures only';
    default:
      return key.kty === undefined ? 'it has no kty' : `its kty ${shown(key.kty)} is none of RSA, EC, OKP`;
  }
}

/**
 * Why `key`'s members make it no key to verify with, by the rules jose applies when a
 * token names it (jose/dist/webapi/jwks/local.js `isUsableJWK` and
 * `importWithAlgCache`, lib/key.js `checkModulusLength`) and WebCrypto's import,
 * worded: the type and curve, a private key's members, `use`, `ext`, `key_ops`,
 * `alg`, the key data, RSA's modulus length. The first that applies is the reason.
 * @returns the reason, or the algorithms to try it with ({@link joseRefusal} judges those)
 */
function memberFault(key: JWK, algorithms: readonly string[]): string | readonly string[] {
  const ofType = algorithmsOfType(key, algorithms);
  if (typeof ofType === 'string') return ofType;
  const secret = PRIVATE_MEMBERS.find((member) => (key as Record<string, unknown>)[member] !== undefined);
  if (secret !== undefined) return `a private key, holding "${secret}": a JWKS holds public keys only`;
  if (key.use !== undefined && key.use !== 'sig') return `its use is ${shown(key.use)}, not "sig"`;
  if (key.ext !== undefined && typeof key.ext !== 'boolean') return 'its ext is not true or false';
  const ops = key.key_ops as unknown;
  if (ops !== undefined) {
    if (!Array.isArray(ops) || ops.some((op) => typeof op !== 'string') || new Set(ops).size !== ops.length) return 'its key_ops is not a list of distinct operations';
    if (!ops.includes('verify')) return `its key_ops ${shown(ops)} do not include "verify"`;
    // WebCrypto imports a public key for what it can do only: a signature key verifies.
    if (ops.length > 1) return `its key_ops ${shown(ops)} list more than "verify", all a public signature key can do`;
  }
  if (key.alg !== undefined && !ofType.includes(key.alg as string)) {
    const kind = key.kty === 'EC' ? `an EC key on ${String(key.crv)}` : `an ${String(key.kty)} key`;
    return `its alg ${shown(key.alg)} is not one ${kind} verifies with: ${ofType.join(', ')}`;
  }
  const data = KEY_DATA[key.kty as string] ?? [];
  const bad = data.find((member) => { const v = (key as Record<string, unknown>)[member]; return typeof v !== 'string' || !BASE64URL.test(v); });
  if (bad !== undefined) return `its "${bad}" is ${(key as Record<string, unknown>)[bad] === undefined ? 'missing' : 'not base64url'}`;
  if (key.kty === 'RSA' && modulusBits(key.n as string) < MIN_RSA_BITS) return `RSA of ${modulusBits(key.n as string)} bits, under ${MIN_RSA_BITS}`;
  return key.alg === undefined ? ofType : [key.alg];
}

/**
 * What jose answers a token of `alg` naming `key` alone, with a signature that cannot
 * hold: the key chosen, imported and checked as for a real token (type, curve, `use`,
 * `key_ops`, a public key, RSA's modulus length), up to the signature.
 * @returns undefined when only the signature failed (the key verifies `alg`), else jose's error
 */
async function joseRefusal(key: JWK, alg: string): Promise<unknown> {
  const header = Buffer.from(JSON.stringify({ alg })).toString('base64url');
  try {
    await compactVerify(`${header}.e30.AAAA`, createLocalJWKSet({ keys: [key] }), { algorithms: [alg] });
  } catch (err) {
    return err instanceof joseErrors.JWSSignatureVerificationFailed ? undefined : err;
  }
  return new Error('a signature of "AAAA" verified');
}

/**
 * Why `key` cannot verify a token of any of `algorithms` (the verifier's) here: its
 * members first ({@link memberFault}, in words), then jose itself, tried with each
 * algorithm the key could take until one passes (what a token naming it would meet).
 * @returns the reason, in words to follow "cannot verify tokens (…)"; undefined when
 *   the key verifies tokens of at least one algorithm
 */
export async function whyKeyCannotVerify(key: JWK, algorithms: readonly string[]): Promise<string | undefined> {
  const fault = memberFault(key, algorithms);
  if (typeof fault === 'string') return fault;
  let first: unknown;
  for (const alg of fault) {
    const err = await joseRefusal(key, alg);
    if (err === undefined) return undefined;
    first ??= err;
  }
  if (fault.length === 0) return 'no algorithm this node takes verifies with it';
  return `jose cannot use it: ${cutText(first instanceof Error ? first.message : String(first), 160)}`;
}

/**
 * The keys of the JWKS as last read, sorted: those that can verify a token, and why
 * each other one cannot. One per verifier (src/auth/jwt.ts); read by the fetch
 * (src/auth/jwks-fetch.ts `cooledFetch`) and by the refusals of a token naming a
 * left-out `kid`.
 */
export class JwksKeyScreen {
  readonly #algorithms: readonly string[];
  readonly #logger: Logger | undefined;
  /** Why each left-out key of the last read set cannot verify, by its `kid`; the first key of a `kid` wins. */
  #leftOut = new Map<string, string>();
  /** The left-out keys of the last read set as logged (`kid` or `#index`, and the reason): what the next read compares with. */
  #logged = new Set<string>();

  /**
   * @param algorithms the JWS algorithms the verifier takes
   * @param logger where {@link JWKS_KEY_LEFT_OUT_LOG} goes; none when absent
   */
  constructor(algorithms: readonly string[], logger?: Logger) {
    this.#algorithms = algorithms;
    this.#logger = logger;
  }

  /**
   * Sorts a set just read (an answer with no key to verify with included: its keys'
   * reasons are logged, and what a token naming one is told, while the fetch fails),
   * and logs each key left out that the set read before did not leave out for the
   * same reason, and each `kid` different keys share ({@link JWKS_KID_SHARED_LOG})
   * that the set read before did not.
   * @returns the keys that can verify a token, in their order, a key listed twice under
   *   one `kid` once ({@link sameKeysOnce}); maybe none
   */
  async screen(keys: readonly JWK[]): Promise<JWK[]> {
    const reasons = await Promise.all(keys.map((key) => whyKeyCannotVerify(key, this.#algorithms)));
    const leftOut = new Map<string, string>();
    const logged = new Set<string>();
    reasons.forEach((reason, index) => {
      if (reason === undefined) return;
      const { kid } = keys[index] as JWK;
      const named = typeof kid === 'string';
      if (named && !leftOut.has(kid)) leftOut.set(kid, reason);
      const entry = `${named ? kid : `#${index}`}\n${reason}`;
      logged.add(entry);
      if (!this.#logged.has(entry)) this.#logger?.warn({ ...(named ? { kid: cutText(kid, MAX_MEMBER_SHOWN) } : { index }), reason }, JWKS_KEY_LEFT_OUT_LOG);
    });
    const kept = sameKeysOnce(keys.filter((_, i) => reasons[i] === undefined));
    for (const [kid, count] of sharedKids(kept)) {
      const entry = `${kid}\nshared by ${count} keys`;
      logged.add(entry);
      if (!this.#logged.has(entry)) this.#logger?.warn({ kid: cutText(kid, MAX_MEMBER_SHOWN), keys: count }, JWKS_KID_SHARED_LOG);
    }
    this.#leftOut = leftOut;
    this.#logged = logged;
    return kept;
  }

  /** Why the left-out key of `kid` in the set last read cannot verify tokens; undefined when no key of that `kid` was left out. */
  reasonFor(kid: string): string | undefined {
    return this.#leftOut.get(kid);
  }
}

/** A key's identity: its `kid` (none is one too), type, curve and public key data. */
function identityOf(key: JWK): string {
  const data = (KEY_DATA[key.kty as string] ?? []).map((member) => (key as Record<string, unknown>)[member]);
  return JSON.stringify([key.kid ?? null, key.kty, key.crv ?? null, ...data]);
}

/**
 * `keys` with each key listed again under the same `kid` dropped: a later copy whose
 * `alg` is that of a copy kept, or that a kept copy without `alg` already covers
 * (jose matches a key without `alg` to every algorithm of its type), is left out; a
 * copy without `alg` takes the place of the copies with one it covers. Copies with
 * different `alg`s are kept: no token matches two of them. Left two, jose would find
 * several keys for one token and verify with none.
 * @param keys usable keys (screened), in the set's order
 * @returns the keys kept, in their order
 */
export function sameKeysOnce(keys: readonly JWK[]): JWK[] {
  const kept: Array<JWK | undefined> = [];
  const byIdentity = new Map<string, number[]>();
  for (const key of keys) {
    const id = identityOf(key);
    const places = byIdentity.get(id) ?? [];
    const copies = places.map((i) => kept[i] as JWK);
    if (copies.some((copy) => copy.alg === undefined || copy.alg === key.alg)) continue;
    if (key.alg === undefined && places.length > 0) {
      // Covers every copy kept: takes the first's place, the others go.
      places.forEach((i, n) => { kept[i] = n === 0 ? key : undefined; });
      byIdentity.set(id, [places[0] as number]);
      continue;
    }
    byIdentity.set(id, [...places, kept.length]);
    kept.push(key);
  }
  return kept.filter((key): key is JWK => key !== undefined);
}

/**
 * The `kid`s of `keys` that two or more different keys carry (the same key under
 * several `alg`s counts once), with how many.
 */
function sharedKids(keys: readonly JWK[]): Map<string, number> {
  const byKid = new Map<string, Set<string>>();
  for (const key of keys) {
    if (typeof key.kid !== 'string') continue;
    const ids = byKid.get(key.kid) ?? new Set<string>();
    ids.add(identityOf(key));
    byKid.set(key.kid, ids);
  }
  return new Map([...byKid].filter(([, ids]) => ids.size > 1).map(([kid, ids]) => [kid, ids.size]));
}

/**
 * Verifies `token` against each key jose found for it, as jose documents for
 * `JWKSMultipleMatchingKeys` (createRemoteJWKSet: "it is possible to opt-in to iterate
 * over the matched keys and attempt verification in an iterative manner"): the first
 * key whose signature holds decides; a key whose signature fails gives way to the next.
 * Used only for a token that names a `kid` several different keys of the JWKS share
 * (a token that names none must name its key: jwt-refusals.ts `severalKeysForAlg`).
 * @returns jose's result with the key that verified
 * @throws jose's error of that key's checks (its claims: expired, `aud` …), or
 *   JWSSignatureVerificationFailed when no key's signature holds
 */
export async function verifiedByEach(token: string, several: joseErrors.JWKSMultipleMatchingKeys, checks: JWTVerifyOptions): Promise<JWTVerifyResult> {
  for await (const key of several) {
    try {
      return await jwtVerify(token, key, checks);
    } catch (err) {
      if (err instanceof joseErrors.JWSSignatureVerificationFailed) continue;
      throw err;
    }
  }
  throw new joseErrors.JWSSignatureVerificationFailed();
}
