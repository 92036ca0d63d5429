/**
 * The written form a client JWT must have before its signature is checked (docs/protocol.md,
 * "Client tokens"): one check, run by the verifier for every path a client token takes
 * (`GET /v1/connect` by header or `?token=`, the `/v1/me` routes, a `refresh` frame), so
 * each refuses a token for its form with the same 401 and the same hint.
 */
import { PixiuError } from '../errors.js';

/**
 * A JWT in JWS compact serialization (RFC 7519 §3.1, RFC 7515 §7.1): three base64url
 * parts joined by dots, written without padding (RFC 7515 §2). jose decodes a part
 * leniently, so the same token with `=` after a part or `+` and `/` for `-` and `_`
 * verified too: one token, several spellings, which a proxy or log rule matching
 * tokens by their text would not know for one. Such a token is refused as any bad one.
 */
export const JWT_FORM = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/**
 * The refusal of a token that is not a JWT at all: not three dot-separated parts (an
 * integrator sent the API token where a user's JWT belongs).
 */
export const NOT_A_JWT = 'invalid token: not a JWT; the client routes (/v1/me, /v1/connect) and a refresh take a user\'s JWT, the API token is for the producer routes';

/**
 * The refusal of a token of three dot-separated parts not in base64url compact form
 * ({@link JWT_FORM}): a JWT re-encoded on its way (padded, or in standard base64 by a
 * proxy or library), which the API token hint would send the wrong way.
 */
export const NOT_COMPACT_JWT = 'invalid token: a JWT is base64url without padding (RFC 7515 §7.1, §2): A-Z a-z 0-9 - _ only, no =, + or /';

/**
 * Refuses a token not written as a JWT in compact serialization, before any decoding.
 * @throws PixiuError UNAUTHORIZED {@link NOT_A_JWT} for a token that is not three
 *   dot-separated parts, {@link NOT_COMPACT_JWT} for three parts not of {@link JWT_FORM}
 */
export function checkJwtForm(token: string): void {
  if (!JWT_FORM.test(token)) throw new PixiuError('UNAUTHORIZED', token.split('.').length === 3 ? NOT_COMPACT_JWT : NOT_A_JWT);
}
