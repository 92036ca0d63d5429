/**
 * Client JWTs (DESIGN.md §6): `sub` is the user id, `exp` is required; optional
 * `tags` (strings, for broadcast filters) and `channels` (patterns the user may
 * subscribe to). Verified with `jose` against one key source: an HS256 secret (its
 * UTF-8 bytes), a PEM public key, or a JWKS URL. `alg: none` is never accepted.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { SignJWT, createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { isUserId } from '../api/schemas.js';
import { PixiuError } from '../errors.js';
import type { JwtKeySource } from './secrets.js';

/** The claims Pixiu reads from a verified client token. */
export interface ClientClaims {
  /** The user id (`sub`). */
  readonly user: string;
  /** Expiry, ms since the epoch (`exp` × 1000). */
  readonly expiresAtMs: number;
  /** Broadcast filter tags; empty when absent. */
  readonly tags: readonly string[];
  /** Channel patterns the user may subscribe to; empty when absent. */
  readonly channels: readonly string[];
}

/** Verifies a compact JWT and returns its claims. */
export type TokenVerifier = (token: string) => Promise<ClientClaims>;

const ASYMMETRIC_ALGS: Record<string, string[]> = {
  rsa: ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'],
  'rsa-pss': ['PS256', 'PS384', 'PS512'],
  ec: ['ES256', 'ES384', 'ES512'],
  ed25519: ['EdDSA', 'Ed25519'],
};

function stringArray(v: unknown, claim: string): string[] {
  if (v === undefined) return [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) {
    throw new PixiuError('UNAUTHORIZED', `invalid token: claim "${claim}" must be an array of strings`);
  }
  return v as string[];
}

/** Turns a verified payload into {@link ClientClaims}, checking the claim shapes. */
function toClaims(payload: JWTPayload): ClientClaims {
  if (typeof payload.sub !== 'string' || payload.sub.length === 0) {
    throw new PixiuError('UNAUTHORIZED', 'invalid token: "sub" must be the user id');
  }
  // The rule every user id follows (docs/decisions.md): a lone surrogate would become
  // U+FFFD in UTF-8 and read another user's inbox; whitespace, control characters and
  // over-long ids could never be posted to.
  if (!isUserId(payload.sub)) throw new PixiuError('UNAUTHORIZED', "the token's sub is not a valid user id");
  if (typeof payload.exp !== 'number') throw new PixiuError('UNAUTHORIZED', 'invalid token: "exp" is required');
  return {
    user: payload.sub,
    expiresAtMs: payload.exp * 1000,
    tags: stringArray(payload.tags, 'tags'),
    channels: stringArray(payload.channels, 'channels'),
  };
}

/**
 * Builds the verifier for a key source.
 *
 * @returns a function that resolves the claims, or rejects with PixiuError
 *   UNAUTHORIZED (`token expired` or `invalid token: …`, no detail of the key), or
 *   UNAVAILABLE when the JWKS cannot be fetched (unreachable, timed out, not a 200)
 * @throws Error when a PEM key cannot be parsed (a start-up error)
 */
export function createVerifier(source: JwtKeySource): TokenVerifier {
  let key: JWTVerifyGetKey;
  let algorithms: string[];
  switch (source.kind) {
    case 'secret':
      {
        const secret = new TextEncoder().encode(source.secret);
        key = async () => secret;
      }
      algorithms = ['HS256'];
      break;
    case 'public-key': {
      const keyObject: KeyObject = createPublicKey(source.pem);
      key = async () => keyObject;
      algorithms = ASYMMETRIC_ALGS[keyObject.asymmetricKeyType ?? ''] ?? [];
      if (algorithms.length === 0) throw new Error(`unsupported public key type ${keyObject.asymmetricKeyType}`);
      break;
    }
    case 'jwks': {
      const remote = createRemoteJWKSet(new URL(source.url));
      key = async (header, token) => {
        try {
          return await remote(header, token);
        } catch (err) {
          // jose passes a failed fetch (connection refused, DNS, TLS) on as fetch's own
          // TypeError: the key source is down, which is no fault of the token (401).
          if (err instanceof joseErrors.JOSEError) throw err;
          throw new PixiuError('UNAVAILABLE', 'cannot fetch the keys to verify the token, retry later', { cause: err });
        }
      };
      algorithms = Object.values(ASYMMETRIC_ALGS).flat();
      break;
    }
  }
  return async (token) => {
    try {
      const { payload } = await jwtVerify(token, key, { algorithms, requiredClaims: ['exp', 'sub'] });
      return toClaims(payload);
    } catch (err) {
      if (err instanceof PixiuError) throw err;
      if (err instanceof joseErrors.JWTExpired) throw new PixiuError('UNAUTHORIZED', 'token expired', { cause: err });
      // Claims are checked once the signature holds: naming the claim tells the key's
      // holder what to fix and nobody else anything (jose's message, e.g. 'missing
      // required "exp" claim').
      if (err instanceof joseErrors.JWTClaimValidationFailed) throw new PixiuError('UNAUTHORIZED', `invalid token: ${err.message}`, { cause: err });
      if (err instanceof joseErrors.JOSEError && (err.code === 'ERR_JWKS_TIMEOUT' || err.code === 'ERR_JOSE_GENERIC')) {
        throw new PixiuError('UNAVAILABLE', 'cannot fetch the keys to verify the token, retry later', { cause: err });
      }
      throw new PixiuError('UNAUTHORIZED', 'invalid token', { cause: err });
    }
  };
}

/** What {@link mintToken} puts in a token. */
export interface MintOptions {
  readonly user: string;
  /** Lifetime in seconds. */
  readonly ttlSec: number;
  readonly tags?: readonly string[];
  readonly channels?: readonly string[];
}

/**
 * Signs a client JWT with an HS256 secret (for `pixiu token`, tests and tools).
 * @throws Error when the key source is not a secret (a public key cannot sign)
 */
export async function mintToken(source: JwtKeySource, opts: MintOptions): Promise<string> {
  if (source.kind !== 'secret') {
    throw new Error(`cannot sign tokens: client JWTs are verified with a ${source.kind === 'jwks' ? 'JWKS URL' : 'public key'}; mint them with your identity provider`);
  }
  const jwt = new SignJWT({
    ...(opts.tags && opts.tags.length > 0 ? { tags: [...opts.tags] } : {}),
    ...(opts.channels && opts.channels.length > 0 ? { channels: [...opts.channels] } : {}),
  })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(opts.user)
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + opts.ttlSec);
  return jwt.sign(new TextEncoder().encode(source.secret));
}
