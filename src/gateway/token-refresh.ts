/**
 * The rule of a WebSocket `refresh` frame (docs/protocol.md, "Client → server"): a
 * token for the same user that expires no earlier than the current one replaces it
 * (its `exp` and `channels`; the channels followed that its patterns no longer allow
 * are then dropped, ConnectionChannels.dropDisallowed). One expiring earlier is
 * refused, so a late or repeated refresh never shortens the session; success is
 * silent (DESIGN.md §6 has no frame for it) but for those drops, failure is an
 * `error` frame.
 *
 * In two steps, as the frame handler uses them (frame-handler.ts): the token is
 * verified when the frame arrives ({@link verifyRefresh}), so a valid one keeps the
 * connection open past the old `exp` even while frames ahead of it are still being
 * handled; it is compared with the token in force ({@link refreshRefusal}) and
 * answered in the frame's turn.
 */
import type { ClientClaims, TokenVerifier } from '../auth/jwt.js';
import { PixiuError } from '../errors.js';

/**
 * Verifies a refresh token (signature, `exp`, the claims' form), never rejecting.
 * @returns the new token's claims, to take its `expiresAtMs` and `channels` from; or the
 *   refusal to answer: UNAUTHORIZED for a token that does not verify (UNAVAILABLE, a
 *   JWKS down)
 */
export async function verifyRefresh(verify: TokenVerifier, token: string): Promise<ClientClaims | PixiuError> {
  try {
    return await verify(token);
  } catch (err) {
    return err instanceof PixiuError ? err : new PixiuError('UNAUTHORIZED', 'invalid token');
  }
}

/**
 * Whether a verified token may replace the connection's current one.
 * @param current the connection's user and the expiry of its token in force, ms since the epoch
 * @returns undefined when it may; else the refusal: FORBIDDEN for another user's token,
 *   INVALID_REQUEST for one that expires before the current one
 */
export function refreshRefusal(claims: ClientClaims, current: { readonly user: string; readonly expiresAtMs: number }): PixiuError | undefined {
  if (claims.user !== current.user) return new PixiuError('FORBIDDEN', 'refresh token is for another user');
  if (claims.expiresAtMs < current.expiresAtMs) return new PixiuError('INVALID_REQUEST', 'the new token expires before the current one');
  return undefined;
}
