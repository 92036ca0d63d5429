/**
 * A client JWT given to `pixiu connect` instead of minted by it (`--token`,
 * `--token-file`): deployments whose tokens are verified with a public key or JWKS
 * have no key for Pixiu to mint with. Read and checked before connecting; the token
 * itself is never shown in an error.
 */
import { readFile } from 'node:fs/promises';
import { decodeJwt } from 'jose/jwt/decode';
import { checkJwtForm } from '../auth/jwt-form.js';
import { StartupError } from '../errors.js';

/**
 * The token in `file` (`--token-file`): its first line, trimmed, without a leading
 * `Bearer ` (as copied from a request's header).
 * @throws StartupError when the file cannot be read or holds no token
 */
export async function readTokenFile(file: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new StartupError(`cannot read --token-file ${file}: ${(err as Error).message}`, { cause: err });
  }
  const token = (text.split('\n')[0] ?? '').trim().replace(/^Bearer\s+/i, '');
  if (token === '') throw new StartupError(`--token-file ${file} holds no token on its first line`);
  return token;
}

/**
 * The JWT given with `--token`, trimmed, once it reads as a JWT whose `sub` is `uid`
 * (decoded, not verified: the service verifies it) in the written form the service
 * takes (src/auth/jwt-form.ts: compact, canonical base64url, no BOM). A token for another user would
 * connect as that user, and print where to resume another inbox than the one asked for.
 * @param from how it was given, for the messages (`--token`, `--token-file <path>`)
 * @throws StartupError when it is not a JWT, its sub is not `uid`, or its form is one the
 *   service refuses (the token is never shown)
 */
export function givenToken(text: string, uid: string, from: string): string {
  const token = text.trim();
  let sub: unknown;
  try {
    sub = decodeJwt(token).sub;
  } catch {
    throw new StartupError(`${from} is not a JWT (three base64url parts separated by dots, the first two JSON: a header and the claims, as your identity provider issues them)`);
  }
  if (sub !== uid) {
    throw new StartupError(`${from} is for ${typeof sub === 'string' ? `user ${JSON.stringify(sub)}` : 'no user (no sub claim)'}, not ${JSON.stringify(uid)}: give the uid the token was issued to`);
  }
  try {
    // What jose decodes leniently the service refuses (padding, unused bits, a BOM): say so before connecting.
    checkJwtForm(token);
  } catch (err) {
    throw new StartupError(`${from} is not a JWT as the service takes it (${(err as Error).message.replace(/^invalid token: /, '')})`);
  }
  return token;
}
