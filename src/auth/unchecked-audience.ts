/**
 * The start-up warning of a node that verifies client tokens with an identity provider's
 * keys (`PIXIU_JWT_PUBLIC_KEY` or `PIXIU_JWKS_URL`) and has no `PIXIU_JWT_AUDIENCE`:
 * `aud` is then not checked (jwt.ts adds the check only when the setting is given), and
 * the provider signs the tokens of every application it serves with the same keys, so
 * a token it issued for another application is accepted as a login of its `sub`
 * (secaudit F3, seen live). Logged once by src/cli/serve.ts; the start goes on, as
 * deployments that run so already must (README, "Set up a fresh machine").
 */
import type { Config } from '../config/config.js';

/** The warn line's message (its field `keySource` names the setting in use). */
export const UNCHECKED_AUDIENCE_LOG = 'client tokens are verified with an identity provider\'s keys and PIXIU_JWT_AUDIENCE is unset, so their aud is not checked: '
  + 'a token the same provider issued for another application (it signs them all with these keys) is accepted as a login of its sub; '
  + 'set PIXIU_JWT_AUDIENCE to the audience your provider puts in the tokens it issues for Pixiu (README, "Set up a fresh machine")';

/**
 * The setting of the asymmetric key source that verifies client tokens without an
 * audience to check, `PIXIU_JWT_PUBLIC_KEY` or `PIXIU_JWKS_URL`; undefined when
 * `PIXIU_JWT_AUDIENCE` is set or tokens are verified with a secret (HS256: its tokens
 * are minted by whoever holds the secret, the app's own backend, not a shared provider).
 */
export function uncheckedAudienceSource(config: Pick<Config, 'jwtPublicKey' | 'jwksUrl' | 'jwtAudience'>): string | undefined {
  if (config.jwtAudience !== undefined) return undefined;
  if (config.jwksUrl !== undefined) return 'PIXIU_JWKS_URL';
  if (config.jwtPublicKey !== undefined) return 'PIXIU_JWT_PUBLIC_KEY';
  return undefined;
}
