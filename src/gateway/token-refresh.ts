/**
 * The rule of a WebSocket `refresh` frame (docs/protocol.md, "Client → server"): a
 * token for the same user that expires no earlier than the current one replaces it
 * (its `exp` and `channels`; the channels followed that its patterns no longer allow
 * are then dropped, ConnectionChannels.dropDisallowed). One expiring earlier is
 * refused, so a late or repeated refresh never shortens the session; success is
 * silent (DESIGN.md §6 has no frame for it) but for those drops, failure is an
 * `error` frame.
 */
import type { ClientClaims, TokenVerifier } from '../auth/jwt.js';
import { PixiuError } from '../errors.js';

/**
 * Verifies a refresh token against the connection's current one.
 * @param current the connection's user and the expiry of its token, ms since the epoch
 * @returns the new token's claims, to take its `expiresAtMs` and `channels` from
 * @throws PixiuError FORBIDDEN for another user's token, INVALID_REQUEST for one that
 *   expires before the current one, UNAUTHORIZED (or UNAVAILABLE, a JWKS down) for one
 *   that does not verify
 */
export async function refreshedClaims(verify: TokenVerifier, token: string, current: { readonly user: string; readonly expiresAtMs: number }): Promise<ClientClaims> {
  let claims: ClientClaims;
  try {
    claims = await verify(token);
  } catch (err) {
    throw err instanceof PixiuError ? err : new PixiuError('UNAUTHORIZED', 'invalid token');
  }
  if (claims.user !== current.user) throw new PixiuError('FORBIDDEN', 'refresh token is for another user');
  if (claims.expiresAtMs < current.expiresAtMs) throw new PixiuError('INVALID_REQUEST', 'the new token expires before the current one');
  return claims;
}
