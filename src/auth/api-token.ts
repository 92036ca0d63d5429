/**
 * Producer/admin authentication: `Authorization: Bearer <API token>` compared in
 * constant time (DESIGN.md §7). A wrong or missing token gets the same answer, with
 * no hint of the right one.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { PixiuError } from '../errors.js';

/** The token of a `Bearer` Authorization header, or undefined. RFC 6750 §2.1. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const m = /^Bearer[ ]+([^\s]+)\s*$/i.exec(header);
  return m?.[1];
}

/** The SHA-256 of a secret, what {@link bearerMatches} compares against. */
export function secretDigest(secret: string): Buffer {
  return createHash('sha256').update(secret).digest();
}

/**
 * Whether `header` is `Bearer <token>` with the token whose digest is `expected`. Both
 * sides are hashed so the comparison takes the same time whatever the length of the
 * presented token, and it is constant-time (`timingSafeEqual`).
 */
export function bearerMatches(header: string | undefined, expected: Buffer): boolean {
  const token = bearerToken(header);
  const given = secretDigest(token ?? '');
  return token !== undefined && timingSafeEqual(given, expected);
}

/**
 * Builds a checker for the API token (see {@link bearerMatches}).
 *
 * @returns a function that throws PixiuError UNAUTHORIZED unless `header` carries the token
 */
export function apiTokenChecker(apiToken: string): (header: string | undefined) => void {
  const expected = secretDigest(apiToken);
  return (header) => {
    if (!bearerMatches(header, expected)) {
      throw new PixiuError('UNAUTHORIZED', 'missing or invalid API token (Authorization: Bearer <token>)');
    }
  };
}
