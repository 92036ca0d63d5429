/**
 * What a client token may say, wherever one is verified (connect, the `/v1/me` routes,
 * `refresh`): its `sub` follows the user-id rule (docs/decisions.md: 1–128 code points,
 * no whitespace, control character or lone surrogate), it is written as RFC 7515 §7.1
 * writes it (base64url, no padding) with time claims that are finite numbers
 * (docs/protocol.md, "Client tokens"), and a `refresh` never shortens the session
 * (docs/protocol.md, "Client → server").
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { decodeJwt } from 'jose';
import { expectError } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { Refused, testToken } from '../harness/ws-client.js';
import { JWT_KEY, expectPong, expectRefused, pongsUntil, startGateway, type GatewayFixture } from './gateway-fixture.js';
import { BAD_SIGNATURE } from '../../src/auth/jwt-refusals.js';
import { NOT_A_JWT, notWellFormed, wrongPartCount } from '../../src/auth/jwt-form.js';
import { NOT_COMPACT, exactly, respellings, signed, tokenWithUrlSafeSignature } from './token-texts.js';

let gw: GatewayFixture;

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: 'tok:' });
});

const NOT_A_USER_ID = /^the token's sub is not a valid user id$/;

/** `sub`s that are no user id: lone surrogates (both would read U+FFFD's inbox), whitespace, controls, 129 code points. */
const BAD_SUBS: ReadonlyArray<{ what: string; sub: string }> = [
  { what: 'a lone high surrogate', sub: '\ud800' },
  { what: 'a lone low surrogate', sub: 'x\udfff' },
  { what: 'a space', sub: 'a b' },
  { what: 'a tab', sub: 'a\tb' },
  { what: 'NUL', sub: 'x\u0000y' },
  { what: 'DEL', sub: 'x\u007fy' },
  { what: '129 characters', sub: 'u'.repeat(129) },
  { what: '129 emoji (code points, not UTF-16 units)', sub: '😀'.repeat(129) },
];

test('a token whose sub is not a valid user id is refused 401 at connect', async () => {
  for (const { what, sub } of BAD_SUBS) {
    const token = await testToken(JWT_KEY, sub);
    await expectRefused(gw.connect('ignored', { token }), 401, 'UNAUTHORIZED', NOT_A_USER_ID).catch((err: unknown) => {
      throw new Error(`${what}: ${(err as Error).message}`);
    });
  }
  // The edges of the rule still connect: 128 characters, 128 emoji, U+FFFD itself.
  for (const sub of ['u'.repeat(128), '😀'.repeat(128), '\ufffd']) {
    const client = await gw.connect('ignored', { token: await testToken(JWT_KEY, sub) });
    assert.equal((await client.next()).user, sub);
    await client.close();
  }
});

test('a token too long for 8 KiB but within the header limit connects in ?token= as in the header (browsers have only the query)', async () => {
  // 700 channel patterns: ~9.3 KiB of token, as a black-box tester's web app had.
  const channels = Array.from({ length: 700 }, (_, i) => `ch.c${i}`);
  const token = await testToken(JWT_KEY, 'long-token', { channels });
  assert.ok(token.length > 8192 && token.length < 12_000, `token of ${token.length} characters`);
  for (const opts of [{ token }, { params: { token } }]) {
    const client = await gw.connect('ignored', opts);
    const welcome = await client.next();
    assert.deepEqual([welcome.t, welcome.user], ['welcome', 'long-token'], JSON.stringify(opts).slice(0, 40));
    await client.close();
  }
});

test('a refused connect carries WWW-Authenticate: Bearer, with error="invalid_token" for a token in the header or ?token=', async () => {
  const challenge = async (opts: Parameters<GatewayFixture['connect']>[1]): Promise<string | null> => {
    try {
      await (await gw.connect('ana', opts)).close();
    } catch (err) {
      if (err instanceof Refused) return err.status === 401 ? err.headers.get('www-authenticate') : `HTTP ${err.status}`;
      throw err;
    }
    return 'connected';
  };
  assert.equal(await challenge({ token: 'not.a.jwt' }), 'Bearer error="invalid_token"');
  assert.equal(await challenge({ params: { token: 'not.a.jwt' } }), 'Bearer error="invalid_token"');
  assert.equal(await challenge({ token: '' }), 'Bearer', 'no token given (an empty Bearer)');
  assert.equal(await challenge({ params: { token: '' } }), 'Bearer', 'an empty token= is no token either');
  // Of several, the route reads the first: ?token=&token=x carries no token it read.
  const raw = await new Promise<{ status: number; challenge: string | undefined }>((resolve, reject) => {
    const req = http.request(new URL('/v1/connect?token=&token=not.a.jwt', gw.url), {
      headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' },
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, challenge: res.headers['www-authenticate'] }));
    });
    req.on('upgrade', () => reject(new Error('upgraded')));
    req.on('error', reject);
    req.end();
  });
  assert.deepEqual(raw, { status: 401, challenge: 'Bearer' });
});

test('the /v1/me routes refuse a token whose sub is not a valid user id with 401', async () => {
  for (const { what, sub } of BAD_SUBS) {
    const authorization = `Bearer ${await testToken(JWT_KEY, sub)}`;
    const read = await gw.client.get('/v1/me/messages', { headers: { authorization } });
    expectError(read, 401, 'UNAUTHORIZED', NOT_A_USER_ID);
    const ack = await gw.client.post('/v1/me/ack', { device: 'd', seq: 0 }, { headers: { authorization } });
    assert.equal(ack.status, 401, `${what}: ${ack.text}`);
  }
});

test('a refresh whose sub is not a valid user id is refused UNAUTHORIZED, naming the refresh', async () => {
  const { client } = await gw.connectWelcomed('\ufffd');
  client.send({ t: 'refresh', token: await testToken(JWT_KEY, '\ud800') });
  const refused = await client.nextOf('error');
  assert.deepEqual(refused, { t: 'error', code: 'UNAUTHORIZED', message: "the token's sub is not a valid user id", ref: { t: 'refresh' } });
  await expectPong(client);
});

test('a refresh with an expired token is refused UNAUTHORIZED saying how far behind and to mint a new one, and the connection stays', async () => {
  const { client } = await gw.connectWelcomed('rhea');
  client.send({ t: 'refresh', token: await testToken(JWT_KEY, 'rhea', { ttlSec: -60 }) });
  const refused = await client.nextOf('error');
  assert.deepEqual([refused.code, refused.ref], ['UNAUTHORIZED', { t: 'refresh' }]);
  assert.match(String(refused.message), /^token expired: its "exp" is 6[0-2] s behind this node's clock; mint a new token \(on an open WebSocket, send it in a "refresh" frame/);
  await expectPong(client);
});

test('a refresh frame without a usable token is refused INVALID_REQUEST, naming the refresh', async () => {
  const { client } = await gw.connectWelcomed('refresh-shape');
  for (const frame of [{ t: 'refresh' }, { t: 'refresh', token: 5 }, { t: 'refresh', token: '' }]) {
    client.send(frame);
    assert.deepEqual(await client.nextOf('error'), {
      t: 'error', code: 'INVALID_REQUEST', message: 'refresh frame needs token: the new JWT, a non-empty string', ref: { t: 'refresh' },
    }, JSON.stringify(frame));
  }
  await expectPong(client);
});

test('a refresh with a token expiring before the current one is refused and keeps the later exp', async () => {
  const long = await testToken(JWT_KEY, 'refresher', { ttlSec: 3600 });
  const { client } = await gw.connectWelcomed('refresher', { token: long });
  const short = await testToken(JWT_KEY, 'refresher', { ttlSec: 2 });
  const shortExpMs = (decodeJwt(short).exp as number) * 1000;
  client.send({ t: 'refresh', token: short });
  assert.deepEqual(await client.next(), {
    t: 'error', code: 'INVALID_REQUEST', message: 'the new token expires before the current one', ref: { t: 'refresh' },
  });
  // Still open past the short token's exp: the session kept the hour-long one. Waiting
  // on pongs until then (the clock closes within a tick of exp, so a close would come first).
  await pongsUntil(client, shortExpMs + 1000);
  // A token expiring later (or at the same time) is still taken, silently.
  client.send({ t: 'refresh', token: await testToken(JWT_KEY, 'refresher', { ttlSec: 7200 }) });
  await expectPong(client);
  assert.equal(client.frames.filter((f) => f.t === 'error').length, 1);
});

test('a refresh is judged against the exp the last refresh taken gave the session, not the connect token\'s', async () => {
  // Mutant killed: #refresh not keeping the new exp (`this.#expiresAtMs = claims.expiresAtMs`
  // dropped): the connection was still kept open to it (its token checked on arrival),
  // but a later refresh expiring between the connect token's exp and the first refresh's
  // was taken silently, and its `channels` patterns replaced the first one's.
  const { client } = await gw.connectWelcomed('refresh-twice', { token: await testToken(JWT_KEY, 'refresh-twice', { ttlSec: 60 }) });
  client.send({ t: 'refresh', token: await testToken(JWT_KEY, 'refresh-twice', { ttlSec: 7200 }) });
  await expectPong(client);
  assert.deepEqual(client.frames.filter((f) => f.t === 'error'), [], 'the first refresh, two hours, was taken');
  client.send({ t: 'refresh', token: await testToken(JWT_KEY, 'refresh-twice', { ttlSec: 3600 }) });
  assert.deepEqual(await client.next(), {
    t: 'error', code: 'INVALID_REQUEST', message: 'the new token expires before the current one', ref: { t: 'refresh' },
  });
});

test('a refresh with a token expiring exactly when the current one does (a repeated refresh) is taken silently', async () => {
  // "No earlier than the current one": the same exp is not shorter. A client that sends
  // its refresh again (a retry, or the same token twice) must not be told it is refused.
  const token = await testToken(JWT_KEY, 'refresh-same-exp', { ttlSec: 3600 });
  const { client } = await gw.connectWelcomed('refresh-same-exp', { token });
  client.send({ t: 'refresh', token });
  // Frames are answered in order: the pong comes after whatever the refresh was answered with.
  await expectPong(client);
  assert.deepEqual(client.frames.filter((f) => f.t === 'error'), [], 'the refresh with the same exp was accepted');
});

test('the /v1/me routes tell the API token and a ?token= apart from a bad JWT: a user\'s JWT in the header is needed', async () => {
  // gw.client sends the API token.
  for (const answer of [await gw.client.get('/v1/me/messages'), await gw.client.post('/v1/me/ack', { device: 'd', seq: 0 })]) {
    expectError(answer, 401, 'UNAUTHORIZED', /^invalid token: not a JWT; the client routes \(\/v1\/me, \/v1\/connect\) and a refresh take a user's JWT, the API token is for the producer routes$/);
  }
  // A JWT in form that fails is told why: garbage, or a signature of another key.
  expectError(await gw.client.get('/v1/me/messages', { headers: { authorization: 'Bearer eyJ9.eyJ9.c2ln' } }), 401, 'UNAUTHORIZED', exactly(notWellFormed('header')));
  const unsigned = (await testToken(JWT_KEY, 'me-bad-signature')).replace(/\.[^.]*$/, '.c2ln');
  expectError(await gw.client.get('/v1/me/messages', { headers: { authorization: `Bearer ${unsigned}` } }), 401, 'UNAUTHORIZED', exactly(BAD_SIGNATURE));
  // A JWT re-encoded (three parts, padded or in standard base64) is told the form, not the API token.
  for (const { what, token } of [...respellings(tokenWithUrlSafeSignature('me-form-hint')), { what: 'padding after the payload', token: 'eyJh.eyJz=.c2ln' }]) {
    const read = await gw.client.get('/v1/me/messages', { headers: { authorization: `Bearer ${token}` } });
    try {
      expectError(read, 401, 'UNAUTHORIZED', NOT_COMPACT);
    } catch (err) {
      assert.fail(`${what}: ${(err as Error).message}`);
    }
  }
  // Two parts or four are no JWT, told by their count; no dot at all, the API token hint.
  for (const [token, message] of [['a.b', wrongPartCount(2)], ['a.b.c.d', wrongPartCount(4)], ['a+b', NOT_A_JWT]] as const) {
    expectError(await gw.client.get('/v1/me/messages', { headers: { authorization: `Bearer ${token}` } }), 401, 'UNAUTHORIZED', exactly(message));
  }
  const token = await testToken(JWT_KEY, 'me-query');
  const inQuery = await gw.client.get(`/v1/me/messages?token=${token}`, { headers: { authorization: '' } });
  expectError(inQuery, 401, 'UNAUTHORIZED', /Authorization header \(Bearer <jwt>, a user's JWT\): \?token= is read only on \/v1\/connect$/);
  expectError(await gw.client.get('/v1/me/messages', { headers: { authorization: '' } }), 401, 'UNAUTHORIZED', /^a token is required: Authorization: Bearer <jwt> \(a user's JWT\)$/);
});

/**
 * Tokens whose time claims are not finite numbers (JSON text, so 1e400 is Infinity once
 * parsed), each with the answer docs/protocol.md gives it ("Client tokens"); `nbf` 1e400
 * is one jose's own check refuses first, as not yet valid.
 */
function nonFiniteTimes(user: string): Array<{ what: string; token: string; message: RegExp }> {
  const exp = Math.floor(Date.now() / 1000) + 3600;
  const sub = JSON.stringify(user);
  return [
    { what: 'exp 1e400', token: signed(`{"sub":${sub},"exp":1e400}`), message: /^invalid token: "exp" is not a finite number$/ },
    { what: 'iat 1e400', token: signed(`{"sub":${sub},"exp":${exp},"iat":1e400}`), message: /^invalid token: "iat" is not a finite number$/ },
    { what: 'iat -1e400', token: signed(`{"sub":${sub},"exp":${exp},"iat":-1e400}`), message: /^invalid token: "iat" is not a finite number$/ },
    { what: 'nbf -1e400', token: signed(`{"sub":${sub},"exp":${exp},"nbf":-1e400}`), message: /^invalid token: "nbf" is not a finite number$/ },
    { what: 'nbf 1e400', token: signed(`{"sub":${sub},"exp":${exp},"nbf":1e400}`), message: /^invalid token: "nbf" is not a finite number$/ },
  ];
}

test('the handshake refuses a valid token respelled (padding, standard base64) or with a time claim that is not finite, 401 as a bad token', async () => {
  const user = 'form-connect';
  const token = tokenWithUrlSafeSignature(user);
  // The token as written connects.
  const { client } = await gw.connectWelcomed(user, { token });
  await client.close();
  for (const { what, token: bad, message } of [...respellings(token), ...nonFiniteTimes(user)]) {
    await expectRefused(gw.connect(user, { token: bad }), 401, 'UNAUTHORIZED', message).catch((err: unknown) => {
      throw new Error(`${what}: ${(err as Error).message}`);
    });
  }
  // ?token= is held to the same form.
  const [padded] = respellings(token);
  await expectRefused(gw.connect(user, { token: '', params: { token: padded?.token ?? '' } }), 401, 'UNAUTHORIZED', NOT_COMPACT);
});

test('the /v1/me routes refuse a valid token respelled or with a time claim that is not finite, 401', async () => {
  const user = 'form-me';
  const token = tokenWithUrlSafeSignature(user);
  assert.equal((await gw.client.get('/v1/me/messages', { headers: { authorization: `Bearer ${token}` } })).status, 200);
  for (const { what, token: bad, message } of [...respellings(token), ...nonFiniteTimes(user)]) {
    const authorization = `Bearer ${bad}`;
    const read = await gw.client.get('/v1/me/messages', { headers: { authorization } });
    assert.equal(read.status, 401, `${what}: ${read.text}`);
    expectError(read, 401, 'UNAUTHORIZED', message);
    const ack = await gw.client.post('/v1/me/ack', { device: 'd', seq: 0 }, { headers: { authorization } });
    assert.equal(ack.status, 401, `${what}: ${ack.text}`);
  }
});

test('a refresh with a valid token respelled or with a time claim that is not finite is refused UNAUTHORIZED, naming the refresh', async () => {
  const user = 'form-refresh';
  const { client } = await gw.connectWelcomed(user);
  for (const { what, token, message } of [...respellings(tokenWithUrlSafeSignature(user)), ...nonFiniteTimes(user)]) {
    client.send({ t: 'refresh', token });
    const refused = await client.nextOf('error');
    assert.equal(refused.code, 'UNAUTHORIZED', `${what}: ${JSON.stringify(refused)}`);
    assert.match(String(refused.message), message, what);
    assert.deepEqual(refused.ref, { t: 'refresh' }, what);
  }
  // The connection goes on, and a good refresh is still taken silently.
  client.send({ t: 'refresh', token: tokenWithUrlSafeSignature(user) });
  await expectPong(client);
  assert.equal(client.frames.filter((f) => f.t === 'error').length, nonFiniteTimes(user).length + 2);
});
