/**
 * Producer/admin authentication: `Authorization: Bearer <API token>` compared in
 * constant time (DESIGN.md §7). A wrong or missing token gets the same answer, with
 * no hint of the right one.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { PixiuError } from '../errors.js';
import { JWT_FORM } from './jwt-form.js';

/**
 * The characters an API token may hold: visible ASCII (`!` to `~`). What a client can
 * send after `Bearer ` in an Authorization header ({@link bearerToken} ends the token
 * at whitespace, and a header holds no other characters safely: RFC 9110 §5.5).
 */
const SENDABLE_TOKEN = /^[\x21-\x7e]*$/;

/**
 * The settings-table check of `PIXIU_API_TOKEN` and of a kept `api-token` file: a
 * token that no client could send is refused at start rather than at every request.
 *
 * @returns what is wrong with the token, never quoting it; undefined when good
 */
export function apiTokenProblem(token: string): string | undefined {
  if (SENDABLE_TOKEN.test(token)) return undefined;
  const where = /^\s|\s$/.test(token) ? 'leading or trailing whitespace' : /\s/.test(token) ? 'whitespace' : 'a character that is not visible ASCII';
  return `it holds ${where}; an API token is visible ASCII (! to ~) only, so that a client can send it in an Authorization header`;
}

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

/** The answer's words for an API token that does not match (the log line's are producer-scope.ts API_TOKEN_REFUSED). */
const REFUSAL_WORDS = 'missing or invalid API token (Authorization: Bearer <token>)';

/**
 * What a producer route answers a token that does not match: {@link REFUSAL_WORDS},
 * and, when the token has a JWT's form (three base64url parts, jwt-form.ts), which
 * routes take a user's JWT — the mirror of the client routes' hint for the API token
 * (jwt-form.ts `NOT_A_JWT`), after a newcomer sent a user's token to a producer route
 * and was told only "invalid". Nothing of the right token: only the given one's shape.
 * @param token the Bearer token sent, if any
 */
export function apiTokenRefusal(token: string | undefined): string {
  return token !== undefined && JWT_FORM.test(token)
    ? `${REFUSAL_WORDS}: this is a JWT; a user's JWT is for the client routes (/v1/me, /v1/connect), the producer and admin routes take the API token`
    : REFUSAL_WORDS;
}

/** Most distinct accepted Authorization values an {@link apiTokenChecker} remembers. */
export const ACCEPTED_HEADERS_KEPT = 16;

/**
 * Builds a checker for the API token (see {@link bearerMatches}).
 *
 * A producer sends the same header with every request, and hashing it each time was
 * about 4 % of a single-message POST's CPU (bench/README.md, "ingest"). So the header
 * values already accepted are kept in a Set and looked up first. The lookup does not
 * let the token be guessed by timing: a Set hashes the whole given string (with the
 * process's random hash seed) and compares contents only when the hashes are equal, so
 * it cannot be probed character by character as a plain `===` could. Only accepted
 * values are kept, at most {@link ACCEPTED_HEADERS_KEPT} (the set is emptied when full),
 * so wrong tokens cannot make it grow.
 *
 * @returns a function that throws PixiuError UNAUTHORIZED unless `header` carries the token
 */
export function apiTokenChecker(apiToken: string): (header: string | undefined) => void {
  const expected = secretDigest(apiToken);
  const accepted = new Set<string>();
  return (header) => {
    if (header === undefined || !accepted.has(header)) {
      if (!bearerMatches(header, expected)) {
        throw new PixiuError('UNAUTHORIZED', apiTokenRefusal(bearerToken(header)));
      }
      if (accepted.size >= ACCEPTED_HEADERS_KEPT) accepted.clear();
      accepted.add(header as string);
    }
  };
}
