/**
 * A client token refused for its written form gets the same 401 and the same words on
 * every path a client token takes (docs/protocol.md, "Client tokens"): `GET /v1/connect`
 * with `Authorization: Bearer` or `?token=`, `GET /v1/me/messages`, `POST /v1/me/ack`,
 * and a `refresh` frame (an `error` frame there, the connection kept). The form is
 * checked in one place (src/auth/jwt-form.ts), before the signature.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileRedis } from '../harness/file-redis.js';
import { Refused, testToken } from '../harness/ws-client.js';
import { BAD_SIGNATURE } from '../../src/auth/jwt-refusals.js';
import { notWellFormed, wrongPartCount } from '../../src/auth/jwt-form.js';
import { JWT_KEY, startGateway, type GatewayFixture } from './gateway-fixture.js';
import { HS256_HEADER, b64url, respellings, signed, signedParts, tokenWithUrlSafeSignature } from './token-texts.js';

let gw: GatewayFixture;

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: 'form:' });
});

/** The paths a client token takes, each with what it answered: `accepted`, or `<status or frame> <code>: <message>`. */
type Answers = Record<'connect header' | 'connect ?token=' | 'GET /v1/me/messages' | 'POST /v1/me/ack' | 'refresh frame', string>;

/** A refusal's answer on an HTTP path, from its JSON error body. */
function httpAnswer(status: number, body: unknown): string {
  const error = (body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  return `${status} ${String(error?.code)}: ${String(error?.message)}`;
}

/** What a handshake with these connect options answered. */
async function connectAnswer(user: string, as: Parameters<GatewayFixture['connect']>[1]): Promise<string> {
  try {
    await (await gw.connect(user, as)).close();
    return 'accepted';
  } catch (err) {
    if (err instanceof Refused) return httpAnswer(err.status, err.body);
    throw err;
  }
}

/**
 * What each path answers `token` with. The refresh is sent on a connection of `user`
 * opened with a 10-minute token, so a token of an hour's lifetime is no shorter; a
 * ping after it shows the refresh was taken silently when no error frame came first.
 */
async function answersTo(user: string, token: string): Promise<Answers> {
  const me = (status: number, body: unknown): string => (status === 200 ? 'accepted' : httpAnswer(status, body));
  const authorization = `Bearer ${token}`;
  const read = await gw.client.get('/v1/me/messages', { headers: { authorization } });
  const ack = await gw.client.post('/v1/me/ack', { device: 'd', seq: 0 }, { headers: { authorization } });
  const { client } = await gw.connectWelcomed(user, { token: await testToken(JWT_KEY, user, { ttlSec: 600 }) });
  client.send({ t: 'refresh', token });
  client.send({ t: 'ping' });
  const reply = await client.next();
  if (reply.t === 'error') assert.deepEqual(reply.ref, { t: 'refresh' }, JSON.stringify(reply));
  const refresh = reply.t === 'pong' ? 'accepted' : `frame ${String(reply.code)}: ${String(reply.message)}`;
  if (reply.t === 'error') assert.deepEqual(await client.next(), { t: 'pong' }, 'the connection goes on after a refused refresh');
  await client.close();
  return {
    'connect header': await connectAnswer(user, { token }),
    'connect ?token=': await connectAnswer(user, { params: { token } }),
    'GET /v1/me/messages': me(read.status, read.body),
    'POST /v1/me/ack': me(ack.status, ack.body),
    'refresh frame': refresh,
  };
}

/** The answers every path gives when it refuses a token 401 with `message` (a frame, for the refresh). */
function refusedEverywhere(message: string): Answers {
  const http = `401 UNAUTHORIZED: ${message}`;
  return { 'connect header': http, 'connect ?token=': http, 'GET /v1/me/messages': http, 'POST /v1/me/ack': http, 'refresh frame': `frame UNAUTHORIZED: ${message}` };
}

const ACCEPTED: Answers = { 'connect header': 'accepted', 'connect ?token=': 'accepted', 'GET /v1/me/messages': 'accepted', 'POST /v1/me/ack': 'accepted', 'refresh frame': 'accepted' };

const NOT_A_JWT = "invalid token: not a JWT; the client routes (/v1/me, /v1/connect) and a refresh take a user's JWT, the API token is for the producer routes";
const NOT_COMPACT = 'invalid token: a JWT is base64url without padding (RFC 7515 §7.1, §2): A-Z a-z 0-9 - _ only, no =, + or /';

test('a token not in compact form gets the same hint on every path: not a JWT (no dot), the count of its parts, not base64url without padding, not well-formed; a bad signature its own reason', async () => {
  const user = 'form-hint';
  const token = tokenWithUrlSafeSignature(user);
  assert.deepEqual(await answersTo(user, token), ACCEPTED, 'the token as written');
  for (const { what, token: respelled } of respellings(token)) {
    assert.deepEqual(await answersTo(user, respelled), refusedEverywhere(NOT_COMPACT), what);
  }
  // The API token's shape (no dots) gets the API token hint; two parts (a JWT cut off
  // when copied) or four are told the count, not sent to the API token.
  assert.deepEqual(await answersTo(user, 'pixiu-api-token-Zm9vYmFy'), refusedEverywhere(NOT_A_JWT));
  assert.deepEqual(await answersTo(user, token.split('.').slice(0, 2).join('.')), refusedEverywhere(wrongPartCount(2)));
  assert.deepEqual(await answersTo(user, `${token}.e30`), refusedEverywhere(wrongPartCount(4)));
  // Of the form but not signed with the key: its own reason on every path, no key detail.
  assert.deepEqual(await answersTo(user, `${token.slice(0, token.lastIndexOf('.'))}.c2ln`), refusedEverywhere(BAD_SIGNATURE));
  // Garbage of three parts: not a well-formed JWT, before any RFC hint.
  assert.deepEqual(await answersTo(user, 'aaa.bbb.ccc'), refusedEverywhere(notWellFormed('header')));
  // Before a later part's form too, as docs/protocol.md orders them (part by part, not
  // JSON first): the header, not the 1-character signature (a hostile-client tester's nit).
  assert.deepEqual(await answersTo(user, 'aaaa.bbbb.c'), refusedEverywhere(notWellFormed('header')));
  assert.deepEqual(await answersTo(user, `${token.slice(0, token.indexOf('.'))}.bbbb.c`), refusedEverywhere(notWellFormed('payload')));
});

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** A canonical base64url part with the lowest of its last character's unused bits set: the same bytes, another spelling. */
function unusedBitSet(part: string): string {
  assert.ok(part.length % 4 >= 2, `${part} has unused bits`);
  return part.slice(0, -1) + ALPHABET[ALPHABET.indexOf(part.at(-1) ?? '') | 1];
}

test('a token with unused bits set in the last character of its header, payload or signature is refused on every path; the same token canonical is taken', async () => {
  const user = 'form-bits';
  // A header of 28 bytes and a payload of a length not a multiple of 3 (JSON may end in
  // spaces) end in a character with unused bits, as the 32-byte signature always does.
  const header = b64url('{"alg":"HS256","typ":"JWT" }');
  let claims = JSON.stringify({ sub: user, exp: Math.floor(Date.now() / 1000) + 3600 });
  while (Buffer.byteLength(claims) % 3 === 0) claims += ' ';
  const payload = b64url(claims);
  const canonical = signedParts(header, payload);
  assert.deepEqual(await answersTo(user, canonical), ACCEPTED, 'the canonical token');
  const signature = canonical.slice(canonical.lastIndexOf('.') + 1);
  const cases = [
    // Signed over the text as sent: only the spelling is at fault.
    { part: 'header', token: signedParts(unusedBitSet(header), payload) },
    { part: 'payload', token: signedParts(header, unusedBitSet(payload)) },
    { part: 'signature', token: `${header}.${payload}.${unusedBitSet(signature)}` },
  ];
  for (const { part, token } of cases) {
    const message = `invalid token: a JWT is canonical base64url (RFC 7515 §2, RFC 4648 §3.5): the unused bits of the ${part}'s last character are not zero`;
    assert.deepEqual(await answersTo(user, token), refusedEverywhere(message), part);
  }
});

test('a token whose header or payload JSON begins with a byte order mark is refused on every path, signed as it is', async () => {
  const user = 'form-bom';
  const claims = JSON.stringify({ sub: user, exp: Math.floor(Date.now() / 1000) + 3600 });
  assert.deepEqual(await answersTo(user, signed(claims)), ACCEPTED, 'the token without a BOM');
  const cases = [
    { part: 'header', token: signed(claims, `\ufeff${HS256_HEADER}`) },
    { part: 'payload', token: signed(`\ufeff${claims}`) },
  ];
  for (const { part, token } of cases) {
    const message = `invalid token: the JWT's ${part} begins with a byte order mark (U+FEFF), which JSON text must not (RFC 8259 §8.1)`;
    assert.deepEqual(await answersTo(user, token), refusedEverywhere(message), part);
  }
});

/** What a node with a secret (HS256 only) says it takes, at the end of an alg refusal. */
const SECRET_TAKES = "HS256: PIXIU_JWT_SECRET or the data dir's jwt-secret";

test('a token whose header the secret cannot verify says why on every path: an alg other than HS256 (none too), no alg, a crit or b64 jose does not take', async () => {
  const user = 'form-header';
  const claims = JSON.stringify({ sub: user, exp: Math.floor(Date.now() / 1000) + 3600 });
  assert.deepEqual(await answersTo(user, signed(claims, '{"alg":"HS256","crit":["b64"],"b64":true}')), ACCEPTED, 'b64 true is the default');
  const cases = [
    { header: '{"alg":"RS256","typ":"JWT"}', message: `invalid token: its alg "RS256" is not one this node's key takes (${SECRET_TAKES})` },
    { header: '{"alg":"HS384"}', message: `invalid token: its alg "HS384" is not one this node's key takes (${SECRET_TAKES})` },
    { header: '{"alg":"none"}', message: `invalid token: its alg "none" is not one this node's key takes (${SECRET_TAKES})` },
    // Quoted as JSON, escaped and cut (src/text-cut.ts): a client's text never passes for the node's own words.
    { header: JSON.stringify({ alg: `\u009b\n${'x'.repeat(80)}` }), message: `invalid token: its alg "\\u009b\\n${'x'.repeat(62)}"… is not one this node's key takes (${SECRET_TAKES})` },
    { header: '{"alg":7}', message: `invalid token: its alg 7 is not one this node's key takes (${SECRET_TAKES})` },
    { header: '{"typ":"JWT"}', message: `invalid token: its header has no alg (RFC 7515 §4.1.1; this node's key takes ${SECRET_TAKES})` },
    { header: '{"alg":"HS256","crit":["exp"]}', message: 'invalid token: its header\'s crit lists "exp", an extension this node does not know (only "b64", RFC 7797)' },
    { header: '{"alg":"HS256","crit":"b64"}', message: 'invalid token: its header\'s crit is not a list of extension names (RFC 7515 §4.1.11)' },
    { header: '{"alg":"HS256","crit":["b64"]}', message: 'invalid token: its header\'s crit lists "b64" but its b64 is not true or false (RFC 7797 §3)' },
    // A crit jose takes: the missing alg is what is wrong.
    { header: '{"crit":["b64"],"b64":true}', message: `invalid token: its header has no alg (RFC 7515 §4.1.1; this node's key takes ${SECRET_TAKES})` },
    // Signed with the key: jose reads a b64 of false only once the signature (over the parts as sent) holds.
    { header: '{"alg":"HS256","crit":["b64"],"b64":false}', message: 'invalid token: its header\'s b64 is false (an unencoded payload), which a JWT must not have (RFC 7797 §7)' },
  ];
  for (const { header, message } of cases) {
    assert.deepEqual(await answersTo(user, signed(claims, header)), refusedEverywhere(message), header);
  }
});
