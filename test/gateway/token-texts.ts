/**
 * Client tokens written by hand, for the tests of their form (docs/protocol.md, "Client
 * tokens"): HS256 signatures with the gateway tests' secret over whatever text the parts
 * are, so a token the service refuses for its form is refused for that alone (its
 * signature holds), and valid tokens respelled as RFC 7515 does not allow.
 */
import { createHmac } from 'node:crypto';
import { JWT_SECRET } from './gateway-fixture.js';

/** The header of the tokens signed here. */
export const HS256_HEADER = '{"alg":"HS256","typ":"JWT"}';

/** `text` (or bytes) in base64url without padding. */
export const b64url = (text: string | Buffer): string => Buffer.from(text).toString('base64url');

/** A token of the two encoded parts as given, signed HS256 with {@link JWT_SECRET} over their text. */
export function signedParts(header: string, payload: string): string {
  const input = `${header}.${payload}`;
  return `${input}.${createHmac('sha256', JWT_SECRET).update(input).digest('base64url')}`;
}

/** An HS256 token signed with the gateway's secret over `payload`, JSON text as given (so `1e400` stays as written). */
export function signed(payload: string | Buffer, header: string | Buffer = HS256_HEADER): string {
  return signedParts(b64url(header), b64url(payload));
}

/** A valid token for `user` whose signature holds a `-` or `_` (a nonce claim is changed until it does). */
export function tokenWithUrlSafeSignature(user: string): string {
  const exp = Math.floor(Date.now() / 1000) + 3600;
  for (let nonce = 0; ; nonce++) {
    const token = signed(JSON.stringify({ sub: user, exp, n: nonce }));
    if (/[-_]/.test(token.split('.')[2] ?? '')) return token;
  }
}

/**
 * The refusal of three parts not in base64url compact form, wherever a client token is
 * taken, as docs/protocol.md ("Client tokens") and docs/api.md quote it.
 */
export const NOT_COMPACT = /^invalid token: a JWT is base64url without padding \(RFC 7515 §7\.1, §2\): A-Z a-z 0-9 - _ only, no =, \+ or \/$/;

/**
 * The same valid token in spellings RFC 7515 does not allow (padding, standard base64),
 * each decoding to the same bytes, with the refusal each gets ({@link NOT_COMPACT}).
 */
export function respellings(token: string): Array<{ what: string; token: string; message: RegExp }> {
  const [header, payload, signature] = token.split('.') as [string, string, string];
  return [
    { what: 'padding after the signature', token: `${token}=`, message: NOT_COMPACT },
    { what: 'standard base64 (+ and /) in the signature', token: `${header}.${payload}.${signature.replace(/-/g, '+').replace(/_/g, '/')}`, message: NOT_COMPACT },
  ];
}

/** A refusal's whole message as a pattern for expectError (test/harness/checks.ts), which takes one. */
export function exactly(message: string): RegExp {
  return new RegExp(`^${message.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);
}
