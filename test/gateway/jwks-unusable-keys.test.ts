/**
 * Keys of a JWKS that jose will not verify with (src/auth/jwks-keys.ts): an RSA key
 * under 2048 bits, an EC key on a curve jose lacks, a secret (`oct`), `use: enc`,
 * `key_ops` without `verify`, a key without its key data, a private key, a point not on
 * its curve. Each is left out when the set is fetched, with one warning naming its
 * `kid` and why — once per fetch that leaves it out anew, not per token — and a token
 * naming it is refused 401 saying the key set is at fault, at the WebSocket handshake
 * and on /v1/me alike. Before, such a token read a bare "invalid token" (RSA under
 * 2048 bits), a 503 (a private key) or "not in the JWKS … a key rotated out". The
 * JWKS is served by a real HTTP server of this file; the node is a real one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose';
import { JWKS_KEY_LEFT_OUT_LOG } from '../../src/auth/jwks-keys.js';
import { expectError, waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { serveLocally } from '../harness/local-http.js';
import { PixiuClient, startInProcessAlone, type InProcessServer } from '../harness/pixiu-server.js';
import { TestClient } from '../harness/ws-client.js';
import { expectRefused } from './gateway-fixture.js';
import { exactly } from './token-texts.js';

/** A JWK as Node exports a key (its `kid` added). */
function nodeJwk(key: ReturnType<typeof generateKeyPairSync>['publicKey'], kid: string): JWK {
  return { ...(key.export({ format: 'jwk' }) as JWK), kid };
}

/**
 * A token of `alg` naming `kid`, for user `bea`, with a signature that is no key's:
 * the key it names is refused before its signature is read.
 */
function tokenNaming(alg: string, kid: string): string {
  const part = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64url');
  return `${part({ alg, kid, typ: 'JWT' })}.${part({ sub: 'bea', exp: Math.floor(Date.now() / 1000) + 3600 })}.${Buffer.alloc(64, 7).toString('base64url')}`;
}

/** Asserts `token` is refused 401 UNAUTHORIZED with exactly `message`, at connect and on `GET /v1/me/messages`. */
async function expectUnauthorized(server: InProcessServer, token: string, message: string): Promise<void> {
  await expectRefused(TestClient.connect(server.service.url, { token, params: { device: 'd' } }), 401, 'UNAUTHORIZED', exactly(message));
  expectError(await new PixiuClient(server.service.url, token).get('/v1/me/messages'), 401, 'UNAUTHORIZED', exactly(message));
}

/** The 401 of a token naming a left-out key, as docs/protocol.md gives it. */
function cannotVerify(kid: string, why: string): string {
  return `invalid token: the JWKS key with kid "${kid}" cannot verify tokens (${why}); the key set at PIXIU_JWKS_URL needs fixing`;
}

test('each key of the JWKS jose will not verify with is left out with one warning naming its kid and why, and a token naming it is 401 saying so', async (t) => {
  const good = await generateKeyPair('ES256');
  const rsa = await exportJWK((await generateKeyPair('RS256')).publicKey);
  const p256 = await exportJWK((await generateKeyPair('ES256')).publicKey);
  /** The bad keys: kid, the key, the alg a token naming it has, why it cannot verify. */
  const bad: Array<[string, JWK, string, string]> = [
    ['rsa-1024', { ...nodeJwk(generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey, 'rsa-1024'), alg: 'RS256', use: 'sig' }, 'RS256', 'RSA of 1024 bits, under 2048'],
    ['k256', nodeJwk(generateKeyPairSync('ec', { namedCurve: 'secp256k1' }).publicKey, 'k256'), 'ES256', 'EC on curve "secp256k1", none of P-256, P-384, P-521'],
    ['hmac', { kty: 'oct', k: Buffer.from('a-shared-secret-of-32-characters').toString('base64url'), kid: 'hmac' }, 'RS256', 'a secret, kty "oct": a JWKS verifies public-key signatures only'],
    ['enc', { ...rsa, kid: 'enc', use: 'enc' }, 'RS256', 'its use is "enc", not "sig"'],
    ['sign-only', { ...rsa, kid: 'sign-only', key_ops: ['sign'] }, 'RS256', 'its key_ops ["sign"] do not include "verify"'],
    ['no-n', { kty: 'RSA', e: 'AQAB', kid: 'no-n' }, 'RS256', 'its "n" is missing'],
    ['private', { ...nodeJwk(generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey, 'private') }, 'RS256', 'a private key, holding "d": a JWKS holds public keys only'],
    // Base64url of the right length, but no point of P-256: jose's import refuses it.
    ['off-curve', { ...p256, x: p256.y, kid: 'off-curve' }, 'ES256', 'jose cannot use it: Invalid keyData'],
  ];
  let keys: JWK[] = [{ ...(await exportJWK(good.publicKey)), kid: 'good', alg: 'ES256', use: 'sig' }, ...bad.map(([, key]) => key)];
  let requests = 0;
  const origin = await serveLocally(t, (_req, res) => {
    requests += 1;
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys }));
  });
  const { logger, lines } = capturingLogger();
  const { server } = await startInProcessAlone(t, { storeDurability: 'relaxed', jwksUrl: `${origin}/jwks` }, logger);
  const leftOut = (): typeof lines => lines.filter((l) => l.msg === JWKS_KEY_LEFT_OUT_LOG);
  await waitUntil('the JWKS fetched at start', async () => lines.some((l) => l.msg === 'JWKS fetched'));
  assert.equal(lines.find((l) => l.msg === 'JWKS fetched')?.keys, 1, 'one usable key');
  assert.deepEqual(leftOut().map((l) => [l.level, l.kid, l.reason]), bad.map(([kid, , , why]) => [40, kid, why]));

  for (const [kid, , alg, why] of bad) await expectUnauthorized(server, tokenNaming(alg, kid), cannotVerify(kid, why));
  // The good key still verifies.
  const client = await TestClient.connect(server.service.url, {
    token: await new SignJWT({}).setProtectedHeader({ alg: 'ES256', kid: 'good' }).setSubject('bea').setExpirationTime('1h').sign(good.privateKey as CryptoKey),
    params: { device: 'd' },
  });
  assert.equal((await client.next()).t, 'welcome');
  await client.close();

  // A token naming a left-out kid has the set read again (at most once a second, as
  // for a kid the set lacks): the same keys left out for the same reasons are not
  // logged again.
  const fetched = requests;
  await waitUntil('the set read again for a left-out kid', async () => {
    await expectUnauthorized(server, tokenNaming('RS256', 'enc'), cannotVerify('enc', 'its use is "enc", not "sig"'));
    return requests > fetched;
  });
  assert.equal(leftOut().length, bad.length, JSON.stringify(leftOut()));

  // A set that leaves out a key anew, or for another reason, logs that key alone.
  keys = [...keys.filter((k) => k.kid !== 'enc'), { ...rsa, kid: 'enc', use: 'wrap' }, { ...rsa, kid: 'verify-and-sign', key_ops: ['verify', 'sign'] }];
  const refetched = requests;
  await waitUntil('the changed set read', async () => {
    await expectUnauthorized(server, tokenNaming('RS256', 'nobody'),
      'invalid token: its kid "nobody" is not in the JWKS at PIXIU_JWKS_URL (a key rotated out, or a token from another issuer; a key published just now is found within a second: the set is read again at most once a second)');
    return requests > refetched;
  });
  assert.deepEqual(leftOut().slice(bad.length).map((l) => [l.kid, l.reason]), [
    ['enc', 'its use is "wrap", not "sig"'],
    ['verify-and-sign', 'its key_ops ["verify","sign"] list more than "verify", all a public signature key can do'],
  ]);
  await expectUnauthorized(server, tokenNaming('RS256', 'enc'), cannotVerify('enc', 'its use is "wrap", not "sig"'));
});
