/**
 * The JWKS key source when the identity provider fails (src/auth/jwks-fetch.ts
 * `cooledFetch`): jose's cooldown runs only from a fetch that succeeded, so without a
 * memory of failures every token (each connect, each made-up `kid`) fetched a failing
 * JWKS again. And a JWKS behind basic auth (credentials in PIXIU_JWKS_URL, a secret
 * setting): fetched with an `Authorization: Basic` header, never with an error that
 * quotes the password into the log. The JWKS is served by an HTTP server of this file.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose';
import { JWKS_COOLDOWN_MS, createVerifier } from '../../src/auth/jwt.js';
import { outageFields } from '../../src/errors.js';
import { freePort } from '../harness/redis-server.js';

/** Serves `answer(req)` ([status, body]) at any path of 127.0.0.1; counts requests. */
async function serve(t: TestContext, answer: (req: http.IncomingMessage) => [number, string]): Promise<{ port: number; hits: () => number }> {
  let hits = 0;
  const server = http.createServer((req, res) => {
    hits += 1;
    const [status, body] = answer(req);
    res.writeHead(status, { 'content-type': 'application/json' }).end(body);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port: (server.address() as AddressInfo).port, hits: () => hits };
}

async function publicJwk(key: CryptoKey): Promise<JWK> {
  return { ...(await exportJWK(key)), kid: 'k1', alg: 'ES256', use: 'sig' };
}

function sign(key: CryptoKey, kid = 'k1'): Promise<string> {
  return new SignJWT({}).setProtectedHeader({ alg: 'ES256', kid }).setSubject('ana').setExpirationTime('1h').sign(key);
}

/** Every message along an error's cause chain. */
function messages(err: unknown): string {
  const out: string[] = [];
  for (let e = err as { message?: unknown; cause?: unknown } | undefined, i = 0; e && i < 5; e = e.cause as typeof e, i++) {
    out.push(String(e.message));
  }
  return out.join(' | ');
}

test('a JWKS answering 500 is not fetched again for every token: about once a second', async (t) => {
  const { privateKey } = await generateKeyPair('ES256');
  const token = await sign(privateKey);
  const { port, hits } = await serve(t, () => [500, 'down']);
  const verify = createVerifier({ kind: 'jwks', url: `http://127.0.0.1:${port}/jwks` });
  const started = performance.now();
  for (let i = 0; i < 50; i++) {
    await assert.rejects(verify(token), { code: 'UNAVAILABLE' });
  }
  const seconds = (performance.now() - started) / 1000;
  assert.ok(hits() <= Math.ceil(seconds) + 1, `${hits()} fetches of a failing JWKS for 50 tokens in ${seconds.toFixed(2)} s`);
});

test('once the JWKS fails, tokens with made-up kids do not each fetch it again; the cached key still verifies', async (t) => {
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwk = await publicJwk(publicKey);
  let up = true;
  const { port, hits } = await serve(t, () => (up ? [200, JSON.stringify({ keys: [jwk] })] : [503, 'rate limited']));
  const verify = createVerifier({ kind: 'jwks', url: `http://127.0.0.1:${port}/jwks` });
  assert.equal((await verify(await sign(privateKey))).user, 'ana');
  up = false;
  // A rule of time, no event to wait on: jose fetches again only after its cooldown.
  await new Promise((resolve) => setTimeout(resolve, JWKS_COOLDOWN_MS + 100));
  const before = hits();
  const started = performance.now();
  for (let i = 0; i < 50; i++) {
    await verify(await sign(privateKey, `made-up-${i}`)).catch(() => undefined);
  }
  const seconds = (performance.now() - started) / 1000;
  const fetches = hits() - before;
  assert.ok(fetches <= Math.ceil(seconds) + 1, `${fetches} fetches for 50 made-up kids in ${seconds.toFixed(2)} s`);
  assert.equal((await verify(await sign(privateKey))).user, 'ana');
});

const PASSWORD = 'pa55-w0rd-of-the-idp';

test('a JWKS URL with credentials that cannot be fetched keeps the password out of the error that gets logged', async () => {
  const { privateKey } = await generateKeyPair('ES256');
  const closedPort = await freePort(); // nothing listens there
  const verify = createVerifier({ kind: 'jwks', url: `http://pixiu:${PASSWORD}@127.0.0.1:${closedPort}/jwks` });
  const err = await verify(await sign(privateKey)).then(() => undefined, (e: unknown) => e);
  assert.equal((err as { code?: string }).code, 'UNAVAILABLE');
  assert.ok(!messages(err).includes(PASSWORD), `the password is in the error: ${messages(err)}`);
  assert.ok(!JSON.stringify(outageFields(err)).includes(PASSWORD), `the password is in the logged fields: ${JSON.stringify(outageFields(err))}`);
});

test('a JWKS URL with credentials is fetched with them (basic auth), and its tokens verify: a user and password, a user alone, a password alone, one with a stray %', async (t) => {
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const keys = JSON.stringify({ keys: [await publicJwk(publicKey)] });
  // user:password as the URL holds them (percent-encoded), and the `user:password` the header must carry.
  const forms: Array<[string, string]> = [
    [`pixiu:${encodeURIComponent(PASSWORD)}`, `pixiu:${PASSWORD}`],
    // A token given as the user name alone (`https://TOKEN@idp/jwks`), as some providers take it.
    [PASSWORD, `${PASSWORD}:`],
    [`:${encodeURIComponent(PASSWORD)}`, `:${PASSWORD}`],
    // A % that starts no valid encoding: the password as written, not dropped.
    ['pixiu:pa%zzword', 'pixiu:pa%zzword'],
  ];
  const wanted = new Set(forms.map(([, pair]) => `Basic ${Buffer.from(pair).toString('base64')}`));
  const { port, hits } = await serve(t, (req) => (wanted.has(req.headers.authorization ?? '') ? [200, keys] : [401, '{}']));
  for (const [credentials, pair] of forms) {
    const verify = createVerifier({ kind: 'jwks', url: `http://${credentials}@127.0.0.1:${port}/jwks` });
    const claims = await verify(await sign(privateKey)).catch((e: unknown) => assert.fail(`${pair} refused: ${messages(e)}`));
    assert.equal(claims.user, 'ana', pair);
  }
  assert.equal(hits(), forms.length, 'one fetch for each verifier');
});

test('credentials holding characters a URL must percent-encode (@ : / % # and non-ASCII) go in the Basic header decoded, as written by the user', async (t) => {
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const keys = JSON.stringify({ keys: [await publicJwk(publicKey)] });
  const user = 'pixiu@corp';
  const password = 'p@ss:w/rd%40#é';
  const wanted = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
  const { port } = await serve(t, (req) => (req.headers.authorization === wanted ? [200, keys] : [401, '{}']));
  const verify = createVerifier({ kind: 'jwks', url: `http://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${port}/jwks` });
  const claims = await verify(await sign(privateKey)).catch((e: unknown) => assert.fail(`refused: ${messages(e)}`));
  assert.equal(claims.user, 'ana');
});

test('every kind of failed JWKS fetch is remembered for the cooldown, not only a 500: no JSON, no key set, keys that are not objects, a key set with an error status, a dropped connection', async (t) => {
  const { privateKey } = await generateKeyPair('ES256');
  const token = await sign(privateKey);
  const answers: Array<[string, [number, string] | 'drop']> = [
    ['200, not JSON', [200, '<html>maintenance</html>']],
    ['200, JSON that is no key set', [200, '{"hello":"world"}']],
    ['200, keys that are not objects', [200, '{"keys":[1,"two"]}']],
    ['503 with a key set', [503, '{"keys":[]}']],
    ['the connection dropped before an answer', 'drop'],
  ];
  for (const [what, answer] of answers) {
    let hits = 0;
    const server = http.createServer((req, res) => {
      hits += 1;
      if (answer === 'drop') req.socket.destroy();
      else res.writeHead(answer[0], { 'content-type': 'application/json' }).end(answer[1]);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const verify = createVerifier({ kind: 'jwks', url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks` });
    const started = performance.now();
    for (let i = 0; i < 50; i++) {
      await assert.rejects(verify(token), { code: 'UNAVAILABLE' }, what);
    }
    const seconds = (performance.now() - started) / 1000;
    assert.ok(hits <= Math.ceil(seconds) + 1, `${what}: ${hits} fetches for 50 tokens in ${seconds.toFixed(2)} s`);
  }
});

test('a JWKS URL that never answers is an outage (503) once jose gives up on it, not a bad token (401)', async (t) => {
  const { privateKey } = await generateKeyPair('ES256');
  // Takes the request and says nothing: jose's fetch times out (5 s, its default).
  const server = http.createServer(() => undefined);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks?key=secret`;
  const verify = createVerifier({ kind: 'jwks', url });
  const token = await sign(privateKey);
  const err = await verify(token).then(() => undefined, (e: unknown) => e);
  assert.equal((err as { code?: string }).code, 'UNAVAILABLE', `answered ${messages(err)}`);
  assert.equal((err as { message?: string }).message, 'cannot fetch the keys to verify the token, retry later');
  // What the log shows names the URL (its query left out) and the wait, not jose's bare "request timed out":
  // the 5 s docs/protocol.md gives, written as a number (read from JWKS_TIMEOUT_MS, the test would stretch with it).
  const shown = `the JWKS URL ${url.replace('?key=secret', '?…')} did not answer in 5000 ms`;
  assert.equal(outageFields(err).cause, shown);
  // Within the cooldown, the refusal repeats that fault.
  const again = await verify(token).then(() => undefined, (e: unknown) => e);
  assert.ok(outageFields(again).cause?.endsWith(`(${shown}); not asked again yet`), outageFields(again).cause);
});
