/**
 * The PEM public key of `PIXIU_JWT_PUBLIC_KEY`: read once, when the configuration is
 * loaded (so a bad key stops the start before Redis or the store), and again by the
 * verifier (src/auth/jwt.ts), with the same rules.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';

/**
 * The JWS algorithms (RFC 7518 §3.1, RFC 8037) a key of each Node key type verifies.
 * An EC key verifies only the one of its curve ({@link EC_CURVES}): a PEM key is given
 * that one alone (readPublicKey), so a token of another is refused for its `alg`.
 */
export const ASYMMETRIC_ALGS: Readonly<Record<string, readonly string[]>> = {
  rsa: ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'],
  ec: ['ES256', 'ES384', 'ES512'],
  ed25519: ['EdDSA', 'Ed25519'],
};

/**
 * Fewest bits of an RSA modulus: jose refuses to verify with a shorter key (RFC 7518
 * §3.3 asks for 2048), so a shorter one would start and then refuse every token.
 */
export const MIN_RSA_BITS = 2048;

/**
 * Node's names of the EC curves an ES256/ES384/ES512 key may be on, and the one
 * algorithm a key on each verifies (RFC 7518 §3.4). Given all three for a P-256 key,
 * jose refused an ES384 token only when importing the key, with WebCrypto's `JWK "crv"
 * does not match the requested algorithm`, which the verifier could answer only as a
 * bare "invalid token".
 */
const EC_CURVES: ReadonlyMap<string, string> = new Map([['prime256v1', 'ES256'], ['secp384r1', 'ES384'], ['secp521r1', 'ES512']]);

/**
 * Turns the two characters `\n` (and `\r\n`) into newlines: how a multi-line PEM is
 * often written in an env file, a Kubernetes secret or a CI variable. A PEM never
 * holds a backslash, so nothing else is changed.
 *
 * @returns the text with real line breaks
 */
export function unescapePem(text: string): string {
  return text.replace(/\\r\\n|\\n/g, '\n');
}

/**
 * Reads a PEM public key (SPKI, `-----BEGIN PUBLIC KEY-----`) and the algorithms it
 * verifies.
 *
 * @param pem the key, with real newlines (see {@link unescapePem})
 * @returns the key object and its algorithms (never empty)
 * @throws Error whose message says what is wrong without quoting the key: it cannot be
 *   parsed (junk around it, a broken body, a private key), or its type or curve is not
 *   one a JWT can be verified with here
 */
export function readPublicKey(pem: string): { key: KeyObject; algorithms: readonly string[] } {
  // Node reads the first PEM block and ignores the rest: a private key or a second key
  // pasted beside it would start unnoticed (and the second key never verify).
  const blocks = pem.match(/-----BEGIN [A-Z0-9 ]+-----/g) ?? [];
  const outside = pem.replace(/-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----/g, '').trim();
  if (blocks.length !== 1 || outside !== '') {
    throw new Error(`it holds ${blocks.length === 1 ? 'text outside its PEM block' : `${blocks.length} PEM blocks`}; give one -----BEGIN PUBLIC KEY----- block, nothing else`);
  }
  // createPublicKey derives the public key from a private one: a private key given
  // here would be read (and kept where only a public one belongs) without a word.
  if (blocks[0]?.includes('PRIVATE KEY') === true) {
    throw new Error('it is a private key; give its public key (-----BEGIN PUBLIC KEY-----), which is all a verifier needs');
  }
  let key: KeyObject;
  try {
    key = createPublicKey({ key: pem, format: 'pem' });
  } catch (err) {
    // OpenSSL's message (`error:1E08010C:DECODER routines::unsupported`) names neither
    // the setting nor the fault; the cause keeps it for a debugger.
    throw new Error('it is not a readable PEM public key (one -----BEGIN PUBLIC KEY----- block, nothing else)', { cause: err });
  }
  const type = key.asymmetricKeyType ?? '';
  const algorithms = ASYMMETRIC_ALGS[type];
  if (type === 'rsa-pss') {
    // jose verifies PS256/384/512 with a plain RSA key only (it refuses an id-RSASSA-PSS one).
    throw new Error('it is an RSA-PSS (id-RSASSA-PSS) key, which cannot verify tokens here; give the same key as a plain RSA public key (rsaEncryption): PS256, PS384 and PS512 tokens verify with it');
  }
  if (key.type !== 'public' || algorithms === undefined) {
    throw new Error(`it is a ${type || 'unknown'} key; accepted: RSA, EC (P-256, P-384, P-521) or Ed25519`);
  }
  const bits = key.asymmetricKeyDetails?.modulusLength;
  if (type === 'rsa' && (bits === undefined || bits < MIN_RSA_BITS)) {
    throw new Error(`it is an RSA key of ${bits ?? 'unknown'} bits; at least ${MIN_RSA_BITS} are needed to verify tokens`);
  }
  const curve = key.asymmetricKeyDetails?.namedCurve;
  if (type === 'ec') {
    const alg = curve === undefined ? undefined : EC_CURVES.get(curve);
    if (alg === undefined) throw new Error(`it is an EC key on curve ${curve ?? 'unknown'}; accepted curves: P-256, P-384, P-521`);
    return { key, algorithms: [alg] };
  }
  return { key, algorithms };
}

/**
 * The settings-table check of `PIXIU_JWT_PUBLIC_KEY` (src/config/settings.ts `check`).
 * @returns what is wrong with the key, in words that never quote it; undefined when good
 */
export function publicKeyProblem(pem: string): string | undefined {
  try {
    readPublicKey(pem);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}
