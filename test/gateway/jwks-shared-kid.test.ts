/**
 * A JWKS listing one `kid` twice (src/auth/jwks-keys.ts): the same key twice — identical,
 * or once with `alg` and once without — is taken once, and its tokens verify; two
 * different keys under one `kid` (an identity provider's rollover that kept the `kid`)
 * are both kept, logged at warn once naming the `kid`, and a token naming it verifies
 * with whichever of them signed it; a token of neither key is a bad signature. Before,
 * every token naming such a `kid` was refused 401 "it names no kid", and nothing was
 * logged when the set was fetched (a black-box security tester's finding, walk22 F5).
 * The JWKS is served by a real HTTP server of this file; the node is a real one, asked
 * over `/v1/me` and the WebSocket handshake.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose';
import { JWKS_KID_SHARED_LOG } from '../../src/auth/jwks-keys.js';
import { BAD_SIGNATURE } from '../../src/auth/jwt-refusals.js';
import { expectError, waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { serveLocally } from '../harness/local-http.js';
import { PixiuClient, startInProcessAlone, type InProcessServer } from '../harness/pixiu-server.js';
import { TestClient } from '../harness/ws-client.js';
import { exactly } from './token-texts.js';

/** A key pair for RS256 and its public JWK. */
async function rsaKey(): Promise<{ privateKey: CryptoKey; jwk: JWK }> {
  const { publicKey, privateKey } = await generateKeyPair('RS256');
  return { privateKey, jwk: await exportJWK(publicKey) };
}

/** An RS256 token for user `bea`, signed with `key`, naming `kid` when given. */
function signedBy(key: CryptoKey, kid?: string): Promise<string> {
  return new SignJWT({}).setProtectedHeader(kid === undefined ? { alg: 'RS256' } : { alg: 'RS256', kid }).setSubject('bea').setExpirationTime('1h').sign(key);
}

/** Asserts `token` is taken at the handshake (a `welcome`) and on `GET /v1/me/messages`. */
async function expectTaken(server: InProcessServer, token: string): Promise<void> {
  const page = await new PixiuClient(server.service.url, token).get('/v1/me/messages');
  assert.equal(page.status, 200, page.text);
  const client = await TestClient.connect(server.service.url, { token, params: { device: 'd' } });
  try {
    assert.equal((await client.next()).t, 'welcome');
  } finally {
    await client.close();
  }
}

/** Starts a node on a JWKS serving `keys`, the set fetched; answers it and its log lines. */
async function nodeOn(t: test.TestContext, keys: JWK[]): Promise<{ server: InProcessServer; lines: ReturnType<typeof capturingLogger>['lines'] }> {
  const origin = await serveLocally(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys }));
  });
  const { logger, lines } = capturingLogger();
  const { server } = await startInProcessAlone(t, { storeDurability: 'relaxed', jwksUrl: `${origin}/jwks` }, logger);
  await waitUntil('the JWKS fetched at start', async () => lines.some((l) => l.msg === 'JWKS fetched'));
  return { server, lines };
}

test('the same key listed twice under one kid (identical, or with and without alg) is taken once: its tokens verify, and nothing is warned', async (t) => {
  const a = await rsaKey();
  const b = await rsaKey();
  const same = { ...a.jwk, kid: 'same', use: 'sig', alg: 'RS256' };
  const other = { ...b.jwk, kid: 'other', use: 'sig', alg: 'RS256' };
  const { server, lines } = await nodeOn(t, [same, same, { ...a.jwk, kid: 'loose' }, { ...a.jwk, kid: 'loose', alg: 'RS256' }, other]);
  await expectTaken(server, await signedBy(a.privateKey, 'same'));
  await expectTaken(server, await signedBy(a.privateKey, 'loose'));
  await expectTaken(server, await signedBy(b.privateKey, 'other'));
  assert.equal(lines.find((l) => l.msg === 'JWKS fetched')?.keys, 3, 'same, loose (the copy without alg), other');
  assert.deepEqual(lines.filter((l) => l.msg === JWKS_KID_SHARED_LOG), []);
});

test('two different keys under one kid are both kept, warned about once naming the kid; a token naming it verifies with either key, one of neither is a bad signature, an expired one of either is expired', async (t) => {
  const old = await rsaKey();
  const next = await rsaKey();
  const stranger = await rsaKey();
  const { server, lines } = await nodeOn(t, [{ ...old.jwk, kid: 'roll', use: 'sig' }, { ...next.jwk, kid: 'roll', use: 'sig', alg: 'RS256' }]);
  await expectTaken(server, await signedBy(old.privateKey, 'roll'));
  await expectTaken(server, await signedBy(next.privateKey, 'roll'));
  // Warned at the fetch at start, before any token.
  assert.deepEqual(lines.filter((l) => l.msg === JWKS_KID_SHARED_LOG).map((l) => [l.level, l.kid, l.keys]), [[40, 'roll', 2]]);
  const forged = await signedBy(stranger.privateKey, 'roll');
  expectError(await new PixiuClient(server.service.url, forged).get('/v1/me/messages'), 401, 'UNAUTHORIZED', exactly(BAD_SIGNATURE));
  // A token naming no kid must still name its key: two keys take RS256.
  expectError(await new PixiuClient(server.service.url, await signedBy(old.privateKey)).get('/v1/me/messages'), 401, 'UNAUTHORIZED',
    exactly('invalid token: it names no kid, and the JWKS at PIXIU_JWKS_URL holds several keys that take its alg "RS256"; the token must name its key with kid'));
  assert.equal(lines.filter((l) => l.msg === JWKS_KID_SHARED_LOG).length, 1, 'once per fetch that finds it anew, not per token');
  // A token whose signature holds with one of the keys is judged on its claims by that
  // key's check: expired is "token expired", not a bad signature from trying the other key.
  for (const key of [old, next]) {
    const expired = await new SignJWT({}).setProtectedHeader({ alg: 'RS256', kid: 'roll' }).setSubject('bea').setExpirationTime(Math.floor(Date.now() / 1000) - 60).sign(key.privateKey);
    expectError(await new PixiuClient(server.service.url, expired).get('/v1/me/messages'), 401, 'UNAUTHORIZED', /^token expired: /);
  }
});
