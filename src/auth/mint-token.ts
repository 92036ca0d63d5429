/**
 * Mints client JWTs signed with an HS256 secret (`pixiu token`, `pixiu connect`, tests
 * and tools). Apart from the verifier (jwt.ts), and importing jose's signing module
 * alone (`jose/jwt/sign`, the same module jose's index exports): jose's index loads
 * every JWS, JWE and JWK module, ~0.05 s of CPU a `pixiu token` run needs none of.
 */
import { SignJWT } from 'jose/jwt/sign';
import type { JwtKeySource } from './secrets.js';

/** What {@link mintToken} puts in a token. */
export interface MintOptions {
  readonly user: string;
  /** Lifetime in seconds. */
  readonly ttlSec: number;
  readonly tags?: readonly string[];
  readonly channels?: readonly string[];
  /** `aud`, set when the service checks it (`PIXIU_JWT_AUDIENCE`). */
  readonly audience?: string | undefined;
  /** `iss`, set when the service checks it (`PIXIU_JWT_ISSUER`). */
  readonly issuer?: string | undefined;
}

/**
 * Signs a client JWT with an HS256 secret (for `pixiu token`, tests and tools), with
 * the `aud` and `iss` the service checks when given.
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
  if (opts.audience !== undefined) jwt.setAudience(opts.audience);
  if (opts.issuer !== undefined) jwt.setIssuer(opts.issuer);
  return jwt.sign(new TextEncoder().encode(source.secret));
}
