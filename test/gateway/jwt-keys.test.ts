/**
 * Client tokens verified with asymmetric keys (DESIGN.md §6, §10): a PEM public key
 * (`PIXIU_JWT_PUBLIC_KEY`, setting `jwtPublicKey`) and a JWKS URL (`PIXIU_JWKS_URL`,
 * setting `jwksUrl`). The keys are made here with `jose`; the JWKS is served by a real
 * HTTP server of this file; clients connect over a real WebSocket. A token signed by
 * the configured key opens the socket (`welcome` for its `sub`) and reads `/v1/me`;
 * one signed by any other key, one whose `kid` is not in the set, one of an `alg` the
 * key does not take (an HS256 token keyed with the public key's own text, `none`), an
 * expired one are refused 401 before the upgrade, the message saying which
 * (src/auth/jwt-refusals.ts). An unreachable JWKS URL is an outage (503), not a bad token.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SignJWT, exportJWK, exportSPKI, generateKeyPair, type CryptoKey, type JWK } from 'jose';
import { expectError, waitUntil } from '../harness/checks.js';
import { serveLocally } from '../harness/local-http.js';
import { PixiuClient, cleanupList, startInProcess, type CleanupContext, type InProcessServer } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { Refused, TestClient, type Frame } from '../harness/ws-client.js';
import { expectRefused } from './gateway-fixture.js';
import { BAD_SIGNATURE } from '../../src/auth/jwt-refusals.js';
import { exactly } from './token-texts.js';

/** The asymmetric algorithms these tests sign with. */
type Alg = 'RS256' | 'ES256' | 'ES384' | 'EdDSA';

/** A token of an accepted algorithm whose signature is not the key's: told so, the key not named. */
const BAD_SIGNATURE_ANSWER = exactly(BAD_SIGNATURE);

/** The algorithms a JWKS may verify, as an alg refusal of a JWKS node lists them. */
const JWKS_ALGS = 'RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA, Ed25519';

let redis: RedisServer;
const cleanup = cleanupList();

before(async () => {
  redis = await RedisServer.start();
});

after(async () => {
  // The private redis-server must die even when a clean-up step fails, or the run hangs.
  try {
    await cleanup.run();
  } finally {
    await redis?.destroy();
  }
});

/** Options of {@link sign}. */
interface SignOptions {
  /** `kid` header; none when absent. */
  kid?: string;
  /** Lifetime in seconds (negative: already expired); default one hour. */
  ttlSec?: number;
}

/** Signs a client token for `sub` with `key` under `alg`, as an identity provider would. */
function sign(key: CryptoKey | Uint8Array, alg: Alg | 'HS256', sub: string, opts: SignOptions = {}): Promise<string> {
  return new SignJWT({})
    .setProtectedHeader({ alg, typ: 'JWT', ...(opts.kid !== undefined ? { kid: opts.kid } : {}) })
    .setSubject(sub)
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + (opts.ttlSec ?? 3600))
    .sign(key);
}

/** A key pair of `alg`. */
function keyPair(alg: Alg): Promise<{ publicKey: CryptoKey; privateKey: CryptoKey }> {
  return generateKeyPair(alg);
}

/** The service in this process, verifying client tokens with `key` (one key source), on its own key prefix. */
function startWith(t: CleanupContext, prefix: string, key: { jwtPublicKey: string } | { jwksUrl: string }): Promise<InProcessServer> {
  return startInProcess(t, { redisUrl: redis.url, redisPrefix: `${prefix}:`, storeDurability: 'relaxed', ...key });
}

/**
 * Connects with `token` and asserts the first frame is the `welcome` of `user` on
 * `device`; the socket is closed again before this returns.
 */
async function expectWelcome(server: InProcessServer, token: string, user: string, device: string): Promise<Frame> {
  const client = await TestClient.connect(server.service.url, { token, params: { device } });
  try {
    const welcome = await client.next();
    assert.equal(welcome.t, 'welcome', JSON.stringify(welcome));
    assert.equal(welcome.user, user);
    assert.equal(welcome.device, device);
    return welcome;
  } finally {
    await client.close();
  }
}

/** Asserts `GET /v1/me/messages` with `token` answers 200 with the token user's inbox (empty here). */
async function expectMeReads(server: InProcessServer, token: string): Promise<void> {
  const answer = await new PixiuClient(server.service.url, token).get('/v1/me/messages');
  assert.equal(answer.status, 200, answer.text);
  assert.deepEqual((answer.body as { messages: unknown[] }).messages, []);
}

/** Asserts a connection with `token` is refused 401 UNAUTHORIZED with a message matching `message`. */
async function expectUnauthorized(server: InProcessServer, token: string, message: RegExp): Promise<void> {
  await expectRefused(TestClient.connect(server.service.url, { token, params: { device: 'd' } }), 401, 'UNAUTHORIZED', message);
  // The same verifier guards the client HTTP routes.
  expectError(await new PixiuClient(server.service.url, token).get('/v1/me/messages'), 401, 'UNAUTHORIZED', message);
}

describe('PIXIU_JWT_PUBLIC_KEY: a PEM public key', () => {
  for (const alg of ['ES256', 'RS256'] as const) {
    test(`${alg}: its private key's token connects; another ${alg} key, an expired token, an HS256 token keyed with the PEM and a token of an alg the key does not take are 401, each saying why`, async (t) => {
      const mine = await keyPair(alg);
      const other = await keyPair(alg);
      const pem = await exportSPKI(mine.publicKey);
      assert.match(pem, /^-----BEGIN PUBLIC KEY-----/);
      const server = await startWith(t, `pem-${alg}`, { jwtPublicKey: pem });

      const good = await sign(mine.privateKey, alg, 'ana');
      await expectWelcome(server, good, 'ana', 'phone');
      await expectMeReads(server, good);

      await expectUnauthorized(server, await sign(other.privateKey, alg, 'ana'), BAD_SIGNATURE_ANSWER);
      await expectUnauthorized(server, await sign(mine.privateKey, alg, 'ana', { ttlSec: -5 }), /^token expired: its "exp" is [5-9] s behind this node's clock; mint a new token/);
      // Algorithm confusion: the public key is public, so an HMAC keyed with its text
      // must not pass for a signature by the private key.
      const takes = alg === 'ES256' ? 'ES256' : 'RS256, RS384, RS512, PS256, PS384, PS512';
      await expectUnauthorized(server, await sign(new TextEncoder().encode(pem), 'HS256', 'ana'),
        exactly(`invalid token: its alg "HS256" is not one this node's key takes (${takes}: PIXIU_JWT_PUBLIC_KEY)`));
      // An EC key verifies the algorithm of its curve alone (a P-256 key: ES256), and an
      // RSA key no EC algorithm: refused for the alg, not for a failed key import.
      const otherAlg = alg === 'ES256' ? 'ES384' : 'ES256';
      await expectUnauthorized(server, await sign((await keyPair(otherAlg)).privateKey, otherAlg, 'ana'),
        exactly(`invalid token: its alg "${otherAlg}" is not one this node's key takes (${takes}: PIXIU_JWT_PUBLIC_KEY)`));

      // A refusal changes nothing for the right key.
      await expectWelcome(server, good, 'ana', 'tablet');
    });
  }
});

/** A JWKS document served over HTTP by this test file, counting its requests. */
interface JwksServer {
  readonly url: string;
  /** GET requests for the JWKS so far. */
  readonly requests: () => number;
}

/** Serves `{keys}` as `application/json` at `/.well-known/jwks.json` on 127.0.0.1; closed at clean-up. */
async function serveJwks(t: CleanupContext, keys: readonly JWK[]): Promise<JwksServer> {
  let requests = 0;
  const origin = await serveLocally(t, (req, res) => {
    if (req.method === 'GET' && req.url === '/.well-known/jwks.json') {
      requests += 1;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys }));
    } else {
      res.writeHead(404).end();
    }
  });
  return { url: `${origin}/.well-known/jwks.json`, requests: () => requests };
}

/** A public JWK as an identity provider publishes it: with its `kid`, `alg` and `use`. */
async function publicJwk(key: CryptoKey, kid: string, alg: Alg): Promise<JWK> {
  return { ...(await exportJWK(key)), kid, alg, use: 'sig' };
}

describe('PIXIU_JWKS_URL: keys from a JWKS served over HTTP', () => {
  let rsa: { publicKey: CryptoKey; privateKey: CryptoKey };
  let ec: { publicKey: CryptoKey; privateKey: CryptoKey };
  let jwks: JwksServer;
  let server: InProcessServer;

  before(async () => {
    rsa = await keyPair('RS256');
    ec = await keyPair('ES256');
    jwks = await serveJwks(cleanup, [await publicJwk(rsa.publicKey, 'rsa-1', 'RS256'), await publicJwk(ec.publicKey, 'ec-1', 'ES256')]);
    server = await startWith(cleanup, 'jwks', { jwksUrl: jwks.url });
  });

  test('a token signed by a key of the set, naming its kid, connects and reads /v1/me; the keys came from the JWKS URL', async () => {
    // Fetched once the node listens (a wrong URL is logged at once: jwks-prefetch.test.ts) …
    await waitUntil('the JWKS fetched at start', async () => jwks.requests() === 1);
    const byRsa = await sign(rsa.privateKey, 'RS256', 'bea', { kid: 'rsa-1' });
    await expectWelcome(server, byRsa, 'bea', 'phone');
    // … and the first token verified with that set, not another fetch.
    assert.equal(jwks.requests(), 1, 'one fetch of the JWKS URL');
    await expectMeReads(server, byRsa);
    await expectWelcome(server, await sign(ec.privateKey, 'ES256', 'cid', { kid: 'ec-1' }), 'cid', 'laptop');
  });

  test('a token signed by another key under a kid of the set is 401', async () => {
    const forger = await keyPair('RS256');
    await expectUnauthorized(server, await sign(forger.privateKey, 'RS256', 'bea', { kid: 'rsa-1' }), BAD_SIGNATURE_ANSWER);
    const ecForger = await keyPair('ES256');
    await expectUnauthorized(server, await sign(ecForger.privateKey, 'ES256', 'bea', { kid: 'ec-1' }), BAD_SIGNATURE_ANSWER);
    // A kid of the set with the other key's algorithm: the kid names the key, whatever signed.
    await expectUnauthorized(server, await sign(ec.privateKey, 'ES256', 'bea', { kid: 'rsa-1' }),
      exactly('invalid token: its kid "rsa-1" names a key of the JWKS at PIXIU_JWKS_URL that does not take its alg "ES256"'));
  });

  test('a token whose kid is not in the set is 401 saying so, even when signed by a key of the set', async () => {
    const stranger = await keyPair('ES256');
    await expectUnauthorized(server, await sign(stranger.privateKey, 'ES256', 'bea', { kid: 'ec-2' }),
      exactly('invalid token: its kid "ec-2" is not in the JWKS at PIXIU_JWKS_URL (a key rotated out, or a token from another issuer; a key published just now is found within a second: the set is read again at most once a second)'));
    await expectUnauthorized(server, await sign(rsa.privateKey, 'RS256', 'bea', { kid: 'rsa-2' }),
      exactly('invalid token: its kid "rsa-2" is not in the JWKS at PIXIU_JWKS_URL (a key rotated out, or a token from another issuer; a key published just now is found within a second: the set is read again at most once a second)'));
    // A kid that is not text is quoted as its JSON.
    await expectUnauthorized(server, await sign(rsa.privateKey, 'RS256', 'bea', { kid: 7 as unknown as string }),
      exactly('invalid token: its kid 7 is not in the JWKS at PIXIU_JWKS_URL (a key rotated out, or a token from another issuer; a key published just now is found within a second: the set is read again at most once a second)'));
    // And the keys of the set still verify.
    await expectWelcome(server, await sign(rsa.privateKey, 'RS256', 'bea', { kid: 'rsa-1' }), 'bea', 'phone');
  });

  test('a token of an alg no key of the set takes is 401 saying so: HS256 (an HMAC is no JWKS key), none, or one with no key in the set', async () => {
    await expectUnauthorized(server, await sign(new TextEncoder().encode('a-secret-of-at-least-32-characters!!'), 'HS256', 'bea', { kid: 'rsa-1' }),
      exactly(`invalid token: its alg "HS256" is not one this node's key takes (${JWKS_ALGS}: PIXIU_JWKS_URL)`));
    const unsigned = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(JSON.stringify({ sub: 'bea', exp: Math.floor(Date.now() / 1000) + 60 })).toString('base64url')}.`;
    await expectUnauthorized(server, unsigned, exactly(`invalid token: its alg "none" is not one this node's key takes (${JWKS_ALGS}: PIXIU_JWKS_URL)`));
    await expectUnauthorized(server, await sign((await keyPair('EdDSA')).privateKey, 'EdDSA', 'bea'),
      exactly('invalid token: it names no kid, and no key of the JWKS at PIXIU_JWKS_URL takes its alg "EdDSA"'));
  });

  test('an expired token signed by a key of the set is 401 token expired', async () => {
    await expectUnauthorized(server, await sign(ec.privateKey, 'ES256', 'bea', { kid: 'ec-1', ttlSec: -5 }), /^token expired: its "exp" is [5-9] s behind this node's clock; mint a new token/);
  });

  test('a token naming no kid, to a set of two keys of its alg, is 401 saying it must name one; with its kid it connects', async (t) => {
    const second = await keyPair('RS256');
    const pair = await serveJwks(t, [await publicJwk(rsa.publicKey, 'rsa-1', 'RS256'), await publicJwk(second.publicKey, 'rsa-2', 'RS256')]);
    const two = await startWith(t, 'jwks-two', { jwksUrl: pair.url });
    await expectUnauthorized(two, await sign(second.privateKey, 'RS256', 'bea'),
      exactly('invalid token: it names no kid, and the JWKS at PIXIU_JWKS_URL holds several keys that take its alg "RS256"; the token must name its key with kid'));
    await expectWelcome(two, await sign(second.privateKey, 'RS256', 'bea', { kid: 'rsa-2' }), 'bea', 'phone');
  });

  test('a JWKS URL nobody answers at is an outage: 503 with Retry-After, not 401', async (t) => {
    // A port that was just listening and is closed now: connections to it are refused.
    const probe = http.createServer();
    probe.listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const { port } = probe.address() as AddressInfo;
    probe.close();
    await once(probe, 'close');
    const down = await startWith(t, 'jwks-down', { jwksUrl: `http://127.0.0.1:${port}/.well-known/jwks.json` });
    const token = await sign(rsa.privateKey, 'RS256', 'bea', { kid: 'rsa-1' });
    let refused: Refused | undefined;
    const message = await expectRefused(TestClient.connect(down.service.url, { token, params: { device: 'd' } }).catch((err: unknown) => {
      if (err instanceof Refused) refused = err;
      throw err;
    }), 503, 'UNAVAILABLE');
    assert.match(message, /keys/);
    assert.equal(refused?.headers.get('retry-after'), '1');
    const answer = await new PixiuClient(down.service.url, token).get('/v1/me/messages');
    expectError(answer, 503, 'UNAVAILABLE');
    assert.equal(answer.headers.get('retry-after'), '1');
    // An outage of the key set, not of Redis: pixiu_redis_errors_total is not raised.
    const metrics = (await new PixiuClient(down.service.url, '').get('/metrics', { headers: { authorization: '' } })).text;
    assert.match(metrics, /^pixiu_http_errors_total\{code="UNAVAILABLE"\} 2$/m, 'the refused connect and the GET are counted as HTTP errors');
    assert.doesNotMatch(metrics, /^pixiu_redis_errors_total\{kind="request"\} [1-9]/m);
  });
});
