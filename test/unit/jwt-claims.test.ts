/**
 * Client JWTs whose signature holds but whose claims do not (src/auth/jwt.ts): the
 * answer names the claim (the key's holder can fix it; nobody else learns anything),
 * while a token signed with another key is told only that its signature does not verify
 * with the node's key (the settings named, no key detail). nbf has a few
 * seconds' tolerance, exp none; aud and iss are checked when configured.
 */
import { test } from 'node:test';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import assert from 'node:assert/strict';
import { createHmac, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { SignJWT } from 'jose';
import { MAX_EXPIRES_AT_MS, NBF_TOLERANCE_SEC, createVerifier } from '../../src/auth/jwt.js';
import { mintToken } from '../../src/auth/mint-token.js';
import { BAD_SIGNATURE, BAD_SIGNATURE_LOG, tokenExpired, tokenExpiredOverHttp } from '../../src/auth/jwt-refusals.js';
import { capturingLogger } from '../harness/log-capture.js';
import { REPO_ROOT } from '../harness/test-build.js';

const SECRET = 'jwt-claims-test-secret-of-32-chars-or-more';
const key = new TextEncoder().encode(SECRET);
const verify = createVerifier({ kind: 'secret', secret: SECRET });

function sign(claims: { sub?: string; exp?: number; nbf?: number }, secret = key): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).sign(secret);
}

test('a token without exp or sub names the missing claim; a future nbf names nbf', async () => {
  const now = Math.floor(Date.now() / 1000);
  await assert.rejects(verify(await sign({ sub: 'ana' })), { code: 'UNAUTHORIZED', message: 'invalid token: missing required "exp" claim' });
  await assert.rejects(verify(await sign({ exp: now + 60 })), { code: 'UNAUTHORIZED', message: 'invalid token: missing required "sub" claim' });
  await assert.rejects(verify(await sign({ sub: 'ana', exp: now + 60, nbf: now + 3600 })), { code: 'UNAUTHORIZED', message: 'token not valid yet: its "nbf" (not before) is more than 5 s ahead of this node\'s clock (docs/protocol.md "Client tokens")' });
  assert.equal((await verify(await sign({ sub: 'ana', exp: now + 60 }))).user, 'ana');
});

test('a time claim that is no finite number is refused as such, also where jose would answer first (nbf 1e400 "not yet valid", exp -1e400 "expired"), and only once the signature holds', async () => {
  const exp = Math.floor(Date.now() / 1000) + 60;
  const signedText = (payload: string, secret = key): string => {
    const input = `${Buffer.from('{"alg":"HS256","typ":"JWT"}').toString('base64url')}.${Buffer.from(payload).toString('base64url')}`;
    return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`;
  };
  const cases: Array<[string, string]> = [
    ['nbf', `{"sub":"ana","exp":${exp},"nbf":1e400}`],
    ['nbf', `{"sub":"ana","exp":${exp},"nbf":-1e400}`],
    ['exp', '{"sub":"ana","exp":1e400}'],
    ['exp', '{"sub":"ana","exp":-1e400}'],
    ['iat', `{"sub":"ana","exp":${exp},"iat":1e400}`],
    ['iat', `{"sub":"ana","exp":${exp},"iat":-1e400}`],
  ];
  for (const [claim, payload] of cases) {
    await assert.rejects(verify(signedText(payload)), { code: 'UNAUTHORIZED', message: `invalid token: "${claim}" is not a finite number` }, payload);
    // Signed with another key: the signature is checked first, the claims are not read.
    await assert.rejects(verify(signedText(payload, new TextEncoder().encode('another-secret-of-at-least-32-characters'))),
      { code: 'UNAUTHORIZED', message: BAD_SIGNATURE }, payload);
  }
});

test('a token signed with another key is told its signature does not verify with this node\'s key, whatever its claims, naming the settings and no key', async () => {
  const other = new TextEncoder().encode('another-secret-of-at-least-32-characters');
  await assert.rejects(verify(await sign({ sub: 'ana' }, other)), { code: 'UNAUTHORIZED', message: BAD_SIGNATURE });
  assert.match(BAD_SIGNATURE, /^invalid token: its signature does not verify with this node's key \(PIXIU_JWT_SECRET, PIXIU_JWT_PUBLIC_KEY or PIXIU_JWKS_URL/);
  assert.ok(!BAD_SIGNATURE.includes(SECRET));
});

test('tokens refused for their signature are logged at warn, thinned (one line per 10 s, then notLogged), with the header\'s alg and kid and never the token', async (t) => {
  const { logger, lines } = capturingLogger();
  const logged = createVerifier({ kind: 'secret', secret: SECRET }, { logger });
  const other = new TextEncoder().encode('another-secret-of-at-least-32-characters');
  const exp = Math.floor(Date.now() / 1000) + 60;
  const forged = await new SignJWT({ sub: 'ana', exp }).setProtectedHeader({ alg: 'HS256', kid: 'other-node' }).sign(other);
  t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
  for (let i = 0; i < 5; i++) await assert.rejects(logged(forged), { message: BAD_SIGNATURE });
  // Other refusals (expired, a claim) are the client's business: not logged here.
  await assert.rejects(logged(await sign({ sub: 'ana', exp: 1 })), { message: /^token expired: / });
  const refused = (): typeof lines => lines.filter((l) => l.msg === BAD_SIGNATURE_LOG);
  assert.equal(refused().length, 1, JSON.stringify(lines));
  assert.equal(refused()[0]?.level, 40);
  assert.equal(refused()[0]?.alg, 'HS256');
  assert.equal(refused()[0]?.kid, 'other-node');
  assert.equal(refused()[0]?.notLogged, undefined);
  t.mock.timers.tick(10_000);
  await assert.rejects(logged(forged), { message: BAD_SIGNATURE });
  assert.equal(refused().length, 2);
  assert.equal(refused()[1]?.notLogged, 4);
  assert.ok(!JSON.stringify(lines).includes(forged.split('.')[2] ?? forged), 'the token is never logged');
});

test('every sub that is not a user id (a number, empty, an array, whitespace) gets the one answer the docs give', async () => {
  const exp = Math.floor(Date.now() / 1000) + 60;
  for (const sub of [42, '', ' ana', 'a\u0000b', ['ana'], null]) {
    const token = await new SignJWT({ sub, exp } as never).setProtectedHeader({ alg: 'HS256' }).sign(key);
    await assert.rejects(verify(token), { code: 'UNAUTHORIZED', message: "the token's sub is not a valid user id" }, JSON.stringify(sub));
  }
});

test('nbf may be a few seconds ahead (an identity provider\'s clock), not more; exp stays strict', async () => {
  const now = Math.floor(Date.now() / 1000);
  assert.equal((await verify(await sign({ sub: 'ana', exp: now + 60, nbf: now + 1 }))).user, 'ana');
  assert.equal((await verify(await sign({ sub: 'ana', exp: now + 60, nbf: now + NBF_TOLERANCE_SEC - 1 }))).user, 'ana');
  await assert.rejects(verify(await sign({ sub: 'ana', exp: now + 60, nbf: now + NBF_TOLERANCE_SEC + 2 })), { code: 'UNAUTHORIZED', message: /"nbf"/ });
  // jose's tolerance would let these through; an expired token is refused however recent.
  for (const exp of [now, now - 1, now - NBF_TOLERANCE_SEC + 1]) {
    await assert.rejects(verify(await sign({ sub: 'ana', exp })), { code: 'UNAUTHORIZED', message: new RegExp(`^token expired: its "exp" is [${now - exp}-${now - exp + 1}] s behind this node's clock; mint a new token`) }, `exp ${exp - now}`);
  }
});

test('the nbf tolerance is the 5 s docs/protocol.md gives: 4 s ahead verifies, 7 s ahead is refused', async () => {
  const now = Math.floor(Date.now() / 1000);
  assert.equal((await verify(await sign({ sub: 'ana', exp: now + 60, nbf: now + 4 }))).user, 'ana');
  await assert.rejects(verify(await sign({ sub: 'ana', exp: now + 60, nbf: now + 7 })), { code: 'UNAUTHORIZED', message: /"nbf"/ });
});

test('aud and iss are checked when configured, and ignored when not', async () => {
  const exp = Math.floor(Date.now() / 1000) + 60;
  const strict = createVerifier({ kind: 'secret', secret: SECRET }, { audience: 'pixiu', issuer: 'https://idp.example' });
  const token = (claims: Record<string, unknown>): Promise<string> =>
    new SignJWT({ sub: 'ana', exp, ...claims }).setProtectedHeader({ alg: 'HS256' }).sign(key);
  assert.equal((await strict(await token({ aud: 'pixiu', iss: 'https://idp.example' }))).user, 'ana');
  assert.equal((await strict(await token({ aud: ['other', 'pixiu'], iss: 'https://idp.example' }))).user, 'ana');
  await assert.rejects(strict(await token({ aud: 'other', iss: 'https://idp.example' })), { code: 'UNAUTHORIZED', message: 'invalid token: unexpected "aud" claim value' });
  await assert.rejects(strict(await token({ aud: 'pixiu', iss: 'https://evil.example' })), { code: 'UNAUTHORIZED', message: 'invalid token: unexpected "iss" claim value' });
  await assert.rejects(strict(await token({ iss: 'https://idp.example' })), { code: 'UNAUTHORIZED', message: 'invalid token: missing required "aud" claim' });
  assert.equal((await verify(await token({ aud: 'other', iss: 'https://evil.example' }))).user, 'ana');
  // What pixiu token mints for such a service passes its check.
  const minted = await mintToken({ kind: 'secret', secret: SECRET }, { user: 'bo', ttlSec: 60, audience: 'pixiu', issuer: 'https://idp.example' });
  assert.equal((await strict(minted)).user, 'bo');
});

test('tags and channels must be arrays of strings: an array holding anything else is refused naming the claim', async () => {
  const exp = Math.floor(Date.now() / 1000) + 60;
  const token = (claims: Record<string, unknown>): Promise<string> =>
    new SignJWT({ sub: 'ana', exp, ...claims }).setProtectedHeader({ alg: 'HS256' }).sign(key);
  for (const claim of ['tags', 'channels']) {
    for (const value of [[1], ['ok', 2], [null], [['nested']], [{ tag: 'x' }], 'not-an-array', null]) {
      await assert.rejects(verify(await token({ [claim]: value })),
        { code: 'UNAUTHORIZED', message: `invalid token: claim "${claim}" must be an array of strings` }, `${claim}: ${JSON.stringify(value)}`);
    }
  }
  const ok = await verify(await token({ tags: ['a', 'b'], channels: ['room.*'] }));
  assert.deepEqual([ok.tags, ok.channels], [['a', 'b'], ['room.*']]);
  // A missing channels claim is told apart from an empty one (its refusal says the claim is missing).
  assert.deepEqual([(await verify(await token({}))).channels, (await verify(await token({ channels: [] }))).channels], [undefined, []]);
});

test('the claims read are the token\'s: expiresAtMs is exp in ms, and what mintToken puts in (one tag, one channel) comes back', async () => {
  const exp = Math.floor(Date.now() / 1000) + 60;
  assert.equal((await verify(await sign({ sub: 'ana', exp }))).expiresAtMs, exp * 1000);
  const minted = await verify(await mintToken({ kind: 'secret', secret: SECRET }, { user: 'bo', ttlSec: 60, tags: ['vip'], channels: ['news.*'] }));
  assert.deepEqual([minted.user, minted.tags, minted.channels], ['bo', ['vip'], ['news.*']]);
  const expiresInSec = (minted.expiresAtMs - Date.now()) / 1000;
  assert.ok(expiresInSec > 58 && expiresInSec <= 60, `expires in ${expiresInSec} s, minted for 60`);
});

test('a secret verifies HS256 only (docs/protocol.md): HS384 and HS512 signed with the same secret are refused', async () => {
  const exp = Math.floor(Date.now() / 1000) + 60;
  for (const alg of ['HS384', 'HS512']) {
    const token = await new SignJWT({ sub: 'ana', exp }).setProtectedHeader({ alg }).sign(key);
    await assert.rejects(verify(token), { code: 'UNAUTHORIZED', message: `invalid token: its alg "${alg}" is not one this node's key takes (HS256: PIXIU_JWT_SECRET or the data dir's jwt-secret)` }, alg);
  }
  assert.equal((await verify(await sign({ sub: 'ana', exp }))).user, 'ana');
});

test('a PEM public key verifies every algorithm docs/protocol.md lists for its type, RS256/384/512 and PS256/384/512 with RSA, ES256/384/512 with EC, EdDSA and Ed25519 with Ed25519', async () => {
  const exp = Math.floor(Date.now() / 1000) + 60;
  const kinds: Array<[string, KeyObject, string[]]> = [
    ['rsa', generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey, ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512']],
    ['P-256', generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey, ['ES256']],
    ['P-384', generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey, ['ES384']],
    ['P-521', generateKeyPairSync('ec', { namedCurve: 'P-521' }).privateKey, ['ES512']],
    ['ed25519', generateKeyPairSync('ed25519').privateKey, ['EdDSA', 'Ed25519']],
  ];
  for (const [type, privateKey, algs] of kinds) {
    const pem = createPublicKey(privateKey).export({ type: 'spki', format: 'pem' }).toString();
    const byPem = createVerifier({ kind: 'public-key', pem });
    for (const alg of algs) {
      const token = await new SignJWT({ sub: 'ana', exp }).setProtectedHeader({ alg }).sign(privateKey);
      const claims = await byPem(token).catch((e: unknown) => assert.fail(`${alg} with a ${type} PEM key refused: ${(e as Error).message}`));
      assert.equal(claims.user, 'ana', alg);
    }
  }
});

test('a finite exp however far ahead is accepted as "far future": its expiry is a real time, at most the last a Date holds, never Infinity (exp 1e306 × 1000 overflows)', async () => {
  const signedText = (payload: string): string => {
    const input = `${Buffer.from('{"alg":"HS256","typ":"JWT"}').toString('base64url')}.${Buffer.from(payload).toString('base64url')}`;
    return `${input}.${createHmac('sha256', key).update(input).digest('base64url')}`;
  };
  for (const exp of ['1e300', '1e306', '1.7e308', '8640000000001']) {
    const claims = await verify(signedText(`{"sub":"ana","exp":${exp}}`));
    assert.equal(claims.expiresAtMs, MAX_EXPIRES_AT_MS, exp);
    assert.equal(new Date(claims.expiresAtMs).getTime(), MAX_EXPIRES_AT_MS, `${exp}: a valid Date`);
  }
  // Up to that time an exp is taken as given.
  assert.equal((await verify(signedText('{"sub":"ana","exp":8640000000000}'))).expiresAtMs, 8.64e15);
  assert.equal((await verify(signedText('{"sub":"ana","exp":4102444800}'))).expiresAtMs, 4102444800000);
});

test('an expired token\'s refusal says how far behind the clock its exp is and what to do, like the other refusals of a token', () => {
  assert.equal(tokenExpired(1_700_000_000, 1_700_000_060_900),
    'token expired: its "exp" is 60 s behind this node\'s clock; mint a new token (on an open WebSocket, send it in a "refresh" frame '
    + 'before the current one\'s "exp", or the connection is closed 4001: docs/protocol.md "Client tokens")');
  assert.match(tokenExpired(1_700_000_000, 1_700_000_000_000), /^token expired: its "exp" is 0 s behind /);
  // The HTTP client routes' words: no WebSocket there, so nothing of refresh frames or 4001.
  assert.equal(tokenExpiredOverHttp(1_700_000_000, 1_700_000_060_900),
    'token expired: its "exp" is 60 s behind this node\'s clock; mint a new token and send the request again with it (docs/protocol.md "Client tokens")');
});

test('the section a token refusal cites is a heading of docs/protocol.md (an early nbf cited "Clock", which is none)', async () => {
  const headings = new Set(readFileSync(path.join(REPO_ROOT, 'docs/protocol.md'), 'utf8').split('\n')
    .filter((line) => line.startsWith('#')).map((line) => line.replace(/^#+\s*/, '')));
  const now = Math.floor(Date.now() / 1000);
  const early = await verify(await sign({ sub: 'ana', exp: now + 60, nbf: now + 3600 })).then(() => '', (err: Error) => err.message);
  for (const message of [early, tokenExpired(now - 60, Date.now()), tokenExpiredOverHttp(now - 60, Date.now())]) {
    const cited = /docs\/protocol\.md "([^"]+)"\)$/.exec(message)?.[1];
    assert.ok(cited !== undefined && headings.has(cited), `${message}: cites ${String(cited)}, not a heading of docs/protocol.md`);
  }
});
