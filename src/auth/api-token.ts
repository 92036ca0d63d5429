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

/**
 * Builds a checker for the API token. Both sides are hashed first so the comparison
 * takes the same time whatever the length of the presented token.
 *
 * @returns a function that throws PixiuError UNAUTHORIZED unless `header` carries the token
 */
export function apiTokenChecker(apiToken: string): (header: string | undefined) => void {
  const expected = createHash('sha256').update(apiToken).digest();
  return (header) => {
    const token = bearerToken(header);
    const given = createHash('sha256').update(token ?? '').digest();
    if (token === undefined || !timingSafeEqual(given, expected)) {
      throw new PixiuError('UNAUTHORIZED', 'missing or invalid API token (Authorization: Bearer <token>)');
    }
  };
}
