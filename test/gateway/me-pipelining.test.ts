/**
 * Requests pipelined on the `/v1/me` routes around a refused token (docs/api.md, "The
 * OpenAPI document and what holds for every route"): the JWT is checked asynchronously
 * (jose; with a JWKS, maybe after a fetch), so a refusal may come after the requests
 * behind it were parsed and dispatched. Raw sockets against the real service, HS256 and
 * a JWKS whose fetch is slow; the device cursors read from Redis.
 *
 * - Sent in one write: the 401 finds its request's body all arrived and keeps the
 *   connection, so every request behind it is acted on AND answered, in order, even
 *   when its own token was verified first (the JWKS case: the refused token's unknown
 *   `kid` waits on a fetch answered after 300 ms, the good one is verified from the
 *   cache at once). Never one acted on unanswered.
 * - A refusal decided while its body is still arriving closes the connection; what the
 *   client sends after it (the rest of that body, another ack), read during the
 *   lingering close, is not acted on: the ack behind moved the cursor, unanswered, before.
 * - A 417 pipelined behind a good request closes the connection for the ones after it
 *   too (it marked the queued response's socket: none); so does a 400 that closes as its
 *   request is handed over (a missing Host), which marked nothing. A request with
 *   `Connection: close` is its client's last (RFC 9112 §9.6): Node's parser (llhttp)
 *   reads nothing after it; pinned here, also behind a slow refusal.
 * - A token refused from the headers (missing, not a JWT, an alg the key does not take),
 *   before any key is used: on an ack, whose body is then still to come, the 401 closes;
 *   on a page (no body) it keeps the connection.
 * - A body refused once it has all arrived (415, 413 from the body parsing, after the
 *   asynchronous token check) keeps the connection: fastify closed it, with the ack
 *   behind already dispatched, applied and never answered.
 */
import { after, before, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose';
import { openInbox, within } from '../harness/checks.js';
import { serveLocally } from '../harness/local-http.js';
import { startInProcess, type InProcessServer } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { testToken } from '../harness/ws-client.js';
import { JWT_KEY, JWT_SECRET } from './gateway-fixture.js';

let redis: RedisServer;
before(async () => { redis = await RedisServer.start(); });
after(() => redis?.destroy());

/** `POST /v1/me/ack` of `device` up to `seq`, with `token`, as raw bytes. */
function ack(token: string, device: string, seq: number, headers = ''): string {
  const body = JSON.stringify({ device, seq });
  return `POST /v1/me/ack HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n${headers}`
    + `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

/** `GET /v1/me/messages` with `token`, as raw bytes. */
function page(token: string): string {
  return `GET /v1/me/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`;
}

/** A raw connection to the node, half-open (it may write on after the node's FIN), its answers read as they come. */
class Raw {
  readonly socket: net.Socket;
  #text = '';
  /** Settles at the node's FIN. */
  readonly ended: Promise<unknown>;

  constructor(url: string) {
    const { port, hostname } = new URL(url);
    this.socket = net.connect({ port: Number(port), host: hostname, allowHalfOpen: true });
    this.socket.setEncoding('latin1').on('data', (chunk: string) => { this.#text += chunk; });
    this.socket.on('error', () => {});
    this.ended = once(this.socket, 'end');
  }

  /** Each answer so far: its status, `(close)` when it says `Connection: close`. */
  answers(): string[] {
    return [...this.#text.matchAll(/HTTP\/1\.1 (\d{3})[^\r]*\r\n((?:[^\r]+\r\n)*)\r\n/g)]
      .map((m) => `${m[1]}${/^connection: close\r$/im.test(m[2] ?? '') ? ' (close)' : ''}`);
  }

  /** Resolves once `count` answers came, or the node's FIN (with fewer). */
  async awaitAnswers(count: number): Promise<string[]> {
    let ended = false;
    void this.ended.then(() => { ended = true; });
    await within(10_000, `${count} answers`, (async () => {
      while (this.answers().length < count && !ended) await Promise.race([once(this.socket, 'data'), this.ended]);
    })());
    return this.answers();
  }
}

/** A node verifying client tokens with `key`, its inbox read from Redis, and `user` given 5 messages. */
async function nodeFor(t: TestContext, prefix: string, key: { jwtSecret: string } | { jwksUrl: string }) {
  const server = await startInProcess(t, { redisUrl: redis.url, redisPrefix: `${prefix}:`, storeDurability: 'relaxed', ...key });
  const { inbox } = await openInbox(t, redis.url, `${prefix}:`);
  return { server, cursors: (user: string) => inbox.cursors(user) };
}

/** Posts 5 messages to `user`. */
async function fill(server: InProcessServer, user: string): Promise<void> {
  for (let i = 0; i < 5; i++) assert.equal((await server.client.post('/v1/messages', { to: user, type: 't', data: i })).status, 201);
}

/** The tokens of the cases: one the node verifies, one it refuses 401. */
interface Tokens { good: string; bad: string }

/**
 * The cases sent in one write: each answer comes, in order, the 401 without
 * `Connection: close`, and each ack answered 200 is applied (the cursors are exactly the
 * answered acks').
 */
async function oneWrite(
  server: InProcessServer, cursors: (user: string) => Promise<Record<string, number>>, user: string, { good, bad }: Tokens,
): Promise<void> {
  const cases: Array<[string, string, string[]]> = [
    ['a', ack(bad, 'a', 1) + ack(good, 'a', 3), ['401', '200']],
    ['b', ack(good, 'b', 1) + ack(bad, 'b', 2) + ack(good, 'b', 3) + page(good), ['200', '401', '200', '200']],
    ['c', page(bad) + ack(good, 'c', 3), ['401', '200']],
    ['d', ack(good, 'd', 2) + page(bad) + page(good) + ack(good, 'd', 4), ['200', '401', '200', '200']],
  ];
  for (const [device, bytes, expected] of cases) {
    const raw = new Raw(server.service.url);
    raw.socket.write(bytes);
    assert.deepEqual(await raw.awaitAnswers(expected.length), expected, `device ${device}`);
    raw.socket.destroy();
  }
  const { a, b, c, d } = await cursors(user);
  assert.deepEqual({ a, b, c, d }, { a: 3, b: 3, c: 3, d: 4 });
}

/**
 * An ack with `bad` whose body is still arriving is refused with `Connection: close`;
 * once the client read that answer, it sends the rest of the body and an ack with
 * `good`: that ack is never acted on, nor answered.
 */
async function afterTheClose(server: InProcessServer, cursors: (user: string) => Promise<Record<string, number>>, user: string, { good, bad }: Tokens): Promise<void> {
  const refused = ack(bad, 'late', 1);
  const raw = new Raw(server.service.url);
  raw.socket.write(refused.slice(0, -5));
  assert.deepEqual(await raw.awaitAnswers(1), ['401 (close)']);
  await within(10_000, "the node's FIN", raw.ended);
  // Written on, not ended: a client's FIN would abort the request before its handler.
  raw.socket.write(refused.slice(-5) + ack(good, 'late', 3));
  // Read, parsed and dispatched at once; the ack would take two Redis round trips.
  await sleep(200);
  assert.deepEqual(raw.answers(), ['401 (close)']);
  assert.equal((await cursors(user)).late, undefined, 'the ack sent after the 401 moved no cursor');
  raw.socket.destroy();
}

test('HS256: acks and pages pipelined around a refused token are all answered and acted on; an ack sent after a closing 401 is neither', async (t) => {
  const { server, cursors } = await nodeFor(t, 'hs', { jwtSecret: JWT_SECRET });
  const user = 'hana';
  await fill(server, user);
  const tokens = { good: await testToken(JWT_KEY, user), bad: await testToken({ kind: 'secret', secret: 'another-hs256-secret-of-32-chars-or-more' }, user) };
  await oneWrite(server, cursors, user, tokens);
  await afterTheClose(server, cursors, user, tokens);
});

test('JWKS, the refused token waiting on a slow fetch: the ack behind it, verified first, is answered after the 401 and applied; one sent after a closing 401, or behind Connection: close, is not', async (t) => {
  const key = await generateKeyPair('ES256');
  const jwk: JWK = { ...(await exportJWK(key.publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  let fetches = 0;
  const origin = await serveLocally(t, (_req, res) => {
    fetches++;
    // The first fetch (the node's start) at once; each later one, for an unknown kid, slow.
    setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] })), fetches === 1 ? 0 : 300);
  });
  const { server, cursors } = await nodeFor(t, 'jwks', { jwksUrl: `${origin}/jwks` });
  const user = 'jun';
  await fill(server, user);
  const sign = (signer: CryptoKey, kid: string): Promise<string> => new SignJWT({}).setProtectedHeader({ alg: 'ES256', kid })
    .setSubject(user).setExpirationTime(Math.floor(Date.now() / 1000) + 3600).sign(signer);
  // An unknown kid: jose fetches the set again, at most once per JWKS_COOLDOWN_MS (1 s).
  const bad = await sign((await generateKeyPair('ES256')).privateKey, 'not-in-the-set');
  const good = await sign(key.privateKey, 'k1');
  const cooledDown = async (): Promise<void> => { await sleep(1100); };
  for (const [device, bytes, expected] of [
    ['first', ack(bad, 'first', 1) + ack(good, 'first', 3), ['401', '200']],
    ['mixed', ack(good, 'mixed', 1) + ack(bad, 'mixed', 2) + ack(good, 'mixed', 3) + page(good), ['200', '401', '200', '200']],
  ] as const) {
    await cooledDown();
    const before = fetches;
    const raw = new Raw(server.service.url);
    raw.socket.write(bytes);
    assert.deepEqual(await raw.awaitAnswers(expected.length), expected, device);
    raw.socket.destroy();
    assert.equal(fetches, before + 1, 'the refused token waited on a fetch of the JWKS');
    assert.equal((await cursors(user))[device], 3, device);
  }
  await cooledDown();
  await afterTheClose(server, cursors, user, { good, bad });
  // A request with `Connection: close` is the client's last (RFC 9112 §9.6): the ack
  // behind it, verified while the refused one waits on the fetch, is not acted on.
  await cooledDown();
  const closing = new Raw(server.service.url);
  closing.socket.write(ack(bad, 'closer', 1, 'Connection: close\r\n') + ack(good, 'closer', 3));
  await within(10_000, "the node's FIN", closing.ended);
  assert.deepEqual(closing.answers(), ['401 (close)']);
  closing.socket.destroy();
  assert.equal((await cursors(user)).closer, undefined, 'the ack after the last request moved no cursor');
});

test('a 417, a 400 closing for a missing Host, or an ack sent with Connection: close, pipelined behind a good ack: the acks after it are not acted on', async (t) => {
  const { server, cursors } = await nodeFor(t, 'expect', { jwtSecret: JWT_SECRET });
  const user = 'eli';
  await fill(server, user);
  const good = await testToken(JWT_KEY, user);
  const noHost = page(good).replace('Host: x\r\n', '');
  for (const [device, refused, status] of [['e', ack(good, 'e', 2, 'Expect: foo\r\n'), '417'], ['h', noHost, '400']] as const) {
    const raw = new Raw(server.service.url);
    raw.socket.write(ack(good, device, 1) + refused + ack(good, device, 3));
    await within(10_000, "the node's FIN", raw.ended);
    assert.deepEqual(raw.answers(), ['200', `${status} (close)`], device);
    raw.socket.destroy();
  }
  // The client's own last request (RFC 9112 §9.6: nothing after it is processed).
  const raw = new Raw(server.service.url);
  raw.socket.write(ack(good, 'c', 1) + ack(good, 'c', 2, 'Connection: close\r\n') + ack(good, 'c', 3));
  await within(10_000, "the node's FIN", raw.ended);
  assert.deepEqual(raw.answers(), ['200', '200 (close)']);
  raw.socket.destroy();
  // A window for the ack after the client's last request, which must never be applied (no event to wait on).
  await sleep(200);
  assert.deepEqual(await cursors(user), { e: 1, h: 1, c: 2 });
});

test('a body refused after the token check (415, 413), the whole request in one write: the connection stays and the ack behind is answered and applied', async (t) => {
  const { server, cursors } = await nodeFor(t, 'body', { jwtSecret: JWT_SECRET });
  const user = 'bo';
  await fill(server, user);
  const good = await testToken(JWT_KEY, user);
  const notJson = ack(good, 'ct', 2).replace('Content-Type: application/json', 'Content-Type: text/plain');
  const big = JSON.stringify({ device: 'big', seq: 2, pad: 'x'.repeat(5000) });
  const chunked = `POST /v1/me/ack HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${good}\r\nContent-Type: application/json\r\n`
    + `Transfer-Encoding: chunked\r\n\r\n${big.length.toString(16)}\r\n${big}\r\n0\r\n\r\n`;
  for (const [device, refused, status] of [['ct', notJson, '415'], ['big', chunked, '413']] as const) {
    const raw = new Raw(server.service.url);
    raw.socket.write(ack(good, device, 1) + refused + ack(good, device, 3));
    assert.deepEqual(await raw.awaitAnswers(3), ['200', status, '200'], device);
    raw.socket.destroy();
    assert.equal((await cursors(user))[device], 3, device);
  }
});

test('a token refused from the headers (missing, not a JWT, an alg not taken): on an ack the 401 closes and the ack behind is not acted on; on a page it keeps the connection', async (t) => {
  const { server, cursors } = await nodeFor(t, 'form', { jwtSecret: JWT_SECRET });
  const user = 'fay';
  await fill(server, user);
  const good = await testToken(JWT_KEY, user);
  const [, payload, signature] = good.split('.');
  const rs256 = `${Buffer.from('{"alg":"RS256","typ":"JWT"}').toString('base64url')}.${payload}.${signature}`;
  const noToken = (bytes: string): string => bytes.replace(/Authorization: Bearer [^\r]*\r\n/, '');
  const refusals: Array<[string, (device: string) => string]> = [
    ['none', (d) => noToken(ack(good, d, 2))],
    ['api', (d) => ack('an-api-token-not-a-jwt', d, 2)],
    ['alg', (d) => ack(rs256, d, 2)],
  ];
  for (const [name, refused] of refusals) {
    const raw = new Raw(server.service.url);
    raw.socket.write(ack(good, `${name}-ack`, 1) + refused(`${name}-ack`) + ack(good, `${name}-ack`, 3));
    await within(10_000, "the node's FIN", raw.ended);
    assert.deepEqual(raw.answers(), ['200', '401 (close)'], name);
    raw.socket.destroy();
  }
  for (const [name, bytes] of [['none', noToken(page(good))], ['api', page('an-api-token-not-a-jwt')], ['alg', page(rs256)]] as const) {
    const raw = new Raw(server.service.url);
    raw.socket.write(bytes + ack(good, `${name}-page`, 3));
    assert.deepEqual(await raw.awaitAnswers(2), ['401', '200'], name);
    raw.socket.destroy();
  }
  // A window for the acks behind the 401s, which must never be applied (no event to wait on).
  await sleep(200);
  assert.deepEqual(await cursors(user), {
    'none-ack': 1, 'api-ack': 1, 'alg-ack': 1, 'none-page': 3, 'api-page': 3, 'alg-page': 3,
  });
});
