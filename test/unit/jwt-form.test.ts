/**
 * The written form of a client JWT (src/auth/jwt-form.ts): each part is base64url in
 * canonical form (RFC 7515 §2, RFC 4648 §3.5), so one token has one spelling. Node's
 * own base64url encoder is the oracle: a part is canonical when decoding and encoding
 * it again gives it back.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { SignJWT } from 'jose';
import { NOT_A_JWT, checkJwtForm, impossibleLength, leadingBom, nonZeroUnusedBits, notWellFormed, wrongPartCount, type JwtPart } from '../../src/auth/jwt-form.js';
import { createVerifier } from '../../src/auth/jwt.js';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** What checkJwtForm says of a token: `ok`, or its refusal's message. */
function formOf(token: string): string {
  try {
    checkJwtForm(token);
    return 'ok';
  } catch (err) {
    assert.equal((err as { code?: unknown }).code, 'UNAUTHORIZED');
    return (err as Error).message;
  }
}

/**
 * The token with `part` in place of one of three canonical parts, the others a header
 * and payload of JSON (`e30`: `{}`) and a signature of 4 characters (`eyJ9`).
 */
function withPart(which: JwtPart, part: string): string {
  const parts = ['e30', 'e30', 'eyJ9'];
  parts[['header', 'payload', 'signature'].indexOf(which)] = part;
  return parts.join('.');
}

/** Whether a part decodes (leniently) to a JSON object, as a header or payload must. */
function jsonObject(part: string): boolean {
  try {
    const value: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

test('each part is refused exactly when its last character has unused bits set, for every character and every length; a header or payload that is no JSON is not a well-formed JWT, whatever its spelling', () => {
  for (const which of ['header', 'payload', 'signature'] as const) {
    // Not JSON, a header or payload is garbage, not a JWT respelled: that first.
    const garbage = (part: string): string | undefined => (which !== 'signature' && !jsonObject(part) ? notWellFormed(which) : undefined);
    // 2 and 3 characters (4 and 2 unused bits), and the same after whole groups of 4.
    for (const head of ['A', 'AB', 'eyJhAA', 'eyJhAAA']) {
      for (const last of ALPHABET) {
        const part = head + last;
        const canonical = Buffer.from(part, 'base64url').toString('base64url') === part;
        assert.equal(formOf(withPart(which, part)), garbage(part) ?? (canonical ? 'ok' : nonZeroUnusedBits(which)), `${which} ${part}`);
      }
    }
    // A whole group of 4 has no unused bits: every last character is canonical.
    for (const last of ALPHABET) assert.equal(formOf(withPart(which, `eyJ${last}`)), garbage(`eyJ${last}`) ?? 'ok', `${which} eyJ${last}`);
    // 4k + 1 characters encode no bytes.
    assert.equal(formOf(withPart(which, 'eyJ9A')), garbage('eyJ9A') ?? impossibleLength(which, 5), which);
    assert.equal(formOf(withPart(which, 'Q')), garbage('Q') ?? impossibleLength(which, 1), which);
  }
  // An empty signature (an unsigned token, refused later by the algorithm) is canonical.
  assert.equal(formOf('e30.e30.'), 'ok');
  // The first part at fault is named.
  assert.equal(formOf('eyJhB.eyJ9B.eyJ9'), notWellFormed('header'));
  assert.equal(formOf('e30.eyJhBB.eyJ9AB'), notWellFormed('payload'));
  assert.equal(formOf('e30.e30.eyJ9AB'), nonZeroUnusedBits('signature'));
});

test('a header or payload of JSON respelled in its last character\'s unused bits, or one character too long, gets the canonical-form hint', () => {
  const b64 = (text: string): string => Buffer.from(text).toString('base64url');
  // 2, 7 and 8 bytes: 3, 10 and 11 characters (2, 4 and 2 unused bits).
  for (const json of ['{}', '{"a":1}', '{"ab":1}']) {
    const part = b64(json);
    const tail = part.length % 4;
    const unused = tail === 2 ? 0b1111 : 0b11;
    const base = ALPHABET.indexOf(part.at(-1) ?? '') & ~unused;
    for (const which of ['header', 'payload'] as const) {
      for (let bits = 0; bits <= unused; bits++) {
        const spelled = `${part.slice(0, -1)}${ALPHABET[base | bits]}`;
        assert.equal(formOf(withPart(which, spelled)), bits === 0 ? 'ok' : nonZeroUnusedBits(which), `${which} ${json} ${spelled}`);
      }
      // 12 characters (9 bytes of JSON) and one more: a length no bytes encode to.
      assert.equal(formOf(withPart(which, `${b64('{"abc":1}')}A`)), impossibleLength(which, 13), which);
    }
  }
});

test('garbage of three parts is not a well-formed JWT, naming the part, before any RFC hint, a later part\'s included, and before the signature is checked', async () => {
  assert.equal(formOf('aaa.bbb.ccc'), notWellFormed('header'));
  assert.equal(formOf('e30.bbb.ccc'), notWellFormed('payload'));
  // Canonical (4-character parts): decoding tells.
  assert.equal(formOf('aaaa.bbbb.cccc'), notWellFormed('header'));
  // Part by part, not JSON first (docs/protocol.md): the header's, not the signature's
  // length (a hostile-client tester's nit: it answered the signature's).
  assert.equal(formOf('aaaa.bbbb.c'), notWellFormed('header'));
  assert.equal(formOf('e30.bbbb.c'), notWellFormed('payload'));
  assert.equal(formOf('e30.e30.c'), impossibleLength('signature', 1));
  const verify = createVerifier({ kind: 'secret', secret: 'jwt-form-test-secret-of-32-characters' });
  const header = Buffer.from('{"alg":"HS256"}').toString('base64url');
  // The form is checked before the signature: a payload that is no JSON says so, not "another key".
  await assert.rejects(verify('aaaa.bbbb.cccc'), { code: 'UNAUTHORIZED', message: notWellFormed('header') });
  await assert.rejects(verify(`${header}.bbbb.cccc`), { code: 'UNAUTHORIZED', message: notWellFormed('payload') });
  await assert.rejects(verify(`${header}.e30.cccc`), { code: 'UNAUTHORIZED', message: /^invalid token: its signature does not verify/ });
});

test('padding, + or /, and a wrong number of parts keep their own hints; the API token hint only for a token with no dot', () => {
  assert.match(formOf('eyJ9.eyJ9.AB=='), /^invalid token: a JWT is base64url without padding/);
  assert.match(formOf('eyJ9.eyJ9.A+/B'), /^invalid token: a JWT is base64url without padding/);
  assert.equal(formOf('pixiu-api-token-Zm9vYmFy'), NOT_A_JWT);
  assert.equal(formOf('eyJ9'), NOT_A_JWT);
  // A JWT cut off when copied (two parts), or run on (four): the count, not the API token.
  assert.equal(formOf('eyJ9.eyJ9'), wrongPartCount(2));
  assert.equal(formOf('eyJ9.eyJ9'), 'invalid token: a JWT is three base64url parts joined by dots, this has 2 (cut off when copied?)');
  assert.equal(formOf('eyJ9.eyJ9.eyJ9.eyJ9'), 'invalid token: a JWT is three base64url parts joined by dots, this has 4');
});

test('a signature respelled in its unused bits no longer verifies: of an ES256 and an RS256 token 16 spellings, of an HS256 one 4, only the one written', async () => {
  const keyed = (alg: string, privateKey: KeyObject, publicKey: KeyObject) => ({
    alg, sign: (t: SignJWT) => t.sign(privateKey),
    verify: createVerifier({ kind: 'public-key', pem: publicKey.export({ type: 'spki', format: 'pem' }).toString() }),
  });
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const secret = 'jwt-form-test-secret-of-32-characters';
  const signers = [
    keyed('ES256', ec.privateKey, createPublicKey(ec.privateKey)),
    keyed('RS256', rsa.privateKey, createPublicKey(rsa.privateKey)),
    { alg: 'HS256', sign: (t: SignJWT) => t.sign(new TextEncoder().encode(secret)), verify: createVerifier({ kind: 'secret', secret }) },
  ];
  for (const { alg, sign, verify } of signers) {
    const token = await sign(new SignJWT({ sub: 'ana' }).setProtectedHeader({ alg }).setExpirationTime('1h'));
    const cut = token.lastIndexOf('.');
    const signature = token.slice(cut + 1);
    const tail = signature.length % 4;
    const unused = tail === 2 ? 0b1111 : 0b11;
    const base = ALPHABET.indexOf(signature.at(-1) ?? '') & ~unused;
    const verified: string[] = [];
    for (let bits = 0; bits <= unused; bits++) {
      const spelled = `${token.slice(0, cut + 1)}${signature.slice(0, -1)}${ALPHABET[base | bits]}`;
      await verify(spelled).then(() => verified.push(spelled), (err: Error) => assert.equal(err.message, nonZeroUnusedBits('signature'), alg));
    }
    assert.deepEqual(verified, [token], `${alg}: ${unused + 1} spellings of its ${signature.length}-character signature`);
  }
});

test('a header or payload whose JSON begins with a byte order mark is refused, signed or not; a signature may begin with those bytes', async () => {
  const secret = 'jwt-form-test-secret-of-32-characters';
  const verify = createVerifier({ kind: 'secret', secret });
  const b64 = (text: string): string => Buffer.from(text).toString('base64url');
  const signedText = (header: string, payload: string): string => {
    const input = `${b64(header)}.${b64(payload)}`;
    return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`;
  };
  const header = '{"alg":"HS256"}';
  const payload = JSON.stringify({ sub: 'ana', exp: Math.floor(Date.now() / 1000) + 60 });
  assert.equal((await verify(signedText(header, payload))).user, 'ana');
  await assert.rejects(verify(signedText(`\ufeff${header}`, payload)), { code: 'UNAUTHORIZED', message: leadingBom('header') });
  await assert.rejects(verify(signedText(header, `\ufeff${payload}`)), { code: 'UNAUTHORIZED', message: leadingBom('payload') });
  // Checked on the text: the BOM's 3 bytes are its first 4 characters, whatever follows.
  for (const after of ['{}', ' {"a":1}']) {
    assert.equal(formOf(withPart('payload', b64(`\ufeff${after}`))), leadingBom('payload'), JSON.stringify(after));
  }
  // What is not JSON behind it is told so first (docs/protocol.md: not JSON, then the form, then a BOM).
  for (const after of ['', '{']) {
    assert.equal(formOf(withPart('payload', b64(`\ufeff${after}`).padEnd(4, 'A'))), notWellFormed('payload'), JSON.stringify(after));
  }
  // U+FEFF anywhere else is JSON's business (inside a string it is a character like any).
  assert.equal(formOf(withPart('payload', b64('{"a":"\ufeff"}'))), 'ok');
  assert.equal(formOf(withPart('signature', '77u_')), 'ok');
});
