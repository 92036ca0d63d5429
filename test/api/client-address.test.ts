/**
 * The node's lines about refused requests and handshakes name the client's address,
 * `ip` (fastify's `request.ip`): the TCP peer's, whatever `X-Forwarded-For` says, unless
 * PIXIU_TRUST_PROXY names the peer as a proxy; then the address that proxy gives. Before,
 * no line named any address (walk34 F5): a burst of `client token refused 401` lines
 * could not be tied to a client. A malformed PIXIU_TRUST_PROXY ends the start naming it.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import proxyaddr from '@fastify/proxy-addr';
import { API_TOKEN_REFUSED } from '../../src/api/app.js';
import { BAD_SIGNATURE_LOG } from '../../src/auth/jwt-refusals.js';
import { ORIGIN_NOT_HOST } from '../../src/gateway/handshake-refusals.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { cleanupList, startInProcessAlone, tempDataDir } from '../harness/pixiu-server.js';
import { listeningUrl, spawnCli } from '../harness/cli-process.js';
import { RedisServer } from '../harness/redis-server.js';
import { TestClient, testToken } from '../harness/ws-client.js';
import { expectRefused } from '../gateway/gateway-fixture.js';

/** The address a client behind a proxy claims (RFC 5737's documentation range). */
const FORWARDED = '203.0.113.7';
const FOREIGN_KEY = { kind: 'secret', secret: 'another-data-dirs-jwt-secret-of-32-chars' } as const;

/** A node on a private Redis logging into `lines`, with `overrides`; the clock mocked for the thinned lines. */
async function node(t: TestContext, overrides: Record<string, string> = {}) {
  const files = cleanupList();
  t.after(() => files.run());
  const { logger, lines } = capturingLogger();
  const { server } = await startInProcessAlone(files, { logLevel: 'info', ...overrides }, logger);
  t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
  const foreign = await testToken(FOREIGN_KEY, 'ann');
  const ipsOf = (msg: string): unknown[] => lines.filter((l: LogLine) => l.msg === msg).map((l) => l.ip);
  /** A `/v1/me` request with a token of another key, then 10 s on (the warning's thinning). */
  const meRefused = async (headers: Record<string, string> = {}): Promise<void> => {
    const answer = await server.client.get('/v1/me/messages', { headers: { authorization: `Bearer ${foreign}`, ...headers } });
    assert.equal(answer.status, 401);
    t.mock.timers.tick(10_000);
  };
  /** A handshake with a token of another key, then 10 s on. */
  const handshakeRefused = async (headers: Record<string, string> = {}): Promise<void> => {
    await expectRefused(TestClient.connect(server.service.url, { token: foreign, params: { device: 'd' }, headers }), 401, 'UNAUTHORIZED');
    t.mock.timers.tick(10_000);
  };
  /** A producer request with a wrong API token, then 10 s on. */
  const producerRefused = async (headers: Record<string, string> = {}): Promise<void> => {
    const answer = await server.client.post('/v1/messages', { to: 'ann', type: 't', data: 1 }, { headers: { authorization: 'Bearer not-the-api-token-0123456789-secret', ...headers } });
    assert.equal(answer.status, 401);
    t.mock.timers.tick(10_000);
  };
  return { server, logger, lines, ipsOf, meRefused, handshakeRefused, producerRefused };
}

test('with no proxy trusted, a refused client token, API token and handshake are logged with the TCP peer\'s ip, X-Forwarded-For or not', async (t) => {
  const { lines, ipsOf, meRefused, handshakeRefused, producerRefused } = await node(t);
  assert.ok(lines.some((l) => l.msg === 'pixiu listening' && !('trustProxy' in l)), 'no trustProxy on the start line when none is trusted');
  await meRefused();
  await meRefused({ 'x-forwarded-for': FORWARDED });
  await handshakeRefused({ 'x-forwarded-for': FORWARDED });
  assert.deepEqual(ipsOf(BAD_SIGNATURE_LOG), ['127.0.0.1', '127.0.0.1', '127.0.0.1']);
  await producerRefused({ 'x-forwarded-for': FORWARDED });
  assert.deepEqual(ipsOf(API_TOKEN_REFUSED), ['127.0.0.1']);
});

test('with PIXIU_TRUST_PROXY naming the peer, the lines carry the client X-Forwarded-For names: HTTP and WebSocket refusals, request rejected, connection open', async (t) => {
  const { server, lines, ipsOf, meRefused, handshakeRefused, producerRefused } = await node(t, { trustProxy: '10.0.0.0/8, 127.0.0.1,' });
  // The start line names the proxies trusted, as read (walk36 F3: no line said it).
  assert.deepEqual(lines.find((l) => l.msg === 'pixiu listening')?.trustProxy, ['10.0.0.0/8', '127.0.0.1']);
  const forwarded = { 'x-forwarded-for': FORWARDED };
  await meRefused(forwarded);
  await handshakeRefused(forwarded);
  // A client's own X-Forwarded-For ahead of the proxy's: the address the trusted proxy saw is kept.
  await meRefused({ 'x-forwarded-for': `198.51.100.9, ${FORWARDED}` });
  // Without the header, the peer is the client.
  await handshakeRefused();
  assert.deepEqual(ipsOf(BAD_SIGNATURE_LOG), [FORWARDED, FORWARDED, FORWARDED, '127.0.0.1']);
  await producerRefused(forwarded);
  assert.deepEqual(ipsOf(API_TOKEN_REFUSED), [FORWARDED]);
  const token = await testToken(server.service.secrets.jwt, 'ann');
  await expectRefused(TestClient.connect(server.service.url, { token, params: { device: 'd' }, headers: { ...forwarded, origin: 'https://elsewhere.example' } }), 403, 'FORBIDDEN');
  assert.deepEqual(ipsOf(ORIGIN_NOT_HOST), [FORWARDED]);
  await expectRefused(TestClient.connect(server.service.url, { token, params: { device: 'd', epoch: 'e1' }, headers: forwarded }), 400, 'INVALID_REQUEST');
  assert.deepEqual(lines.filter((l) => l.msg === 'request rejected' && l.code === 'INVALID_REQUEST').map((l) => l.ip), [FORWARDED]);
  const client = await TestClient.connect(server.service.url, { token, params: { device: 'd' }, headers: forwarded });
  t.after(() => client.close());
  await client.nextOf('welcome');
  assert.deepEqual(ipsOf('connection open'), [FORWARDED]);
});

test('a client inside a trusted range whose X-Forwarded-For names no IP address is logged with its TCP peer\'s ip, not the text it sent', async (t) => {
  // proxy-addr trusts no entry that is not an address but returns it as request.ip
  // unchecked: the client chose the text of its lines' `ip` (reread F2).
  const { lines, ipsOf, meRefused, handshakeRefused, producerRefused } = await node(t, { trustProxy: '10.0.0.0/8, 127.0.0.1' });
  await meRefused({ 'x-forwarded-for': 'not-an-ip' });
  await handshakeRefused({ 'x-forwarded-for': 'not-an-ip, 10.0.0.9' });
  assert.deepEqual(ipsOf(BAD_SIGNATURE_LOG), ['127.0.0.1', '127.0.0.1']);
  await producerRefused({ 'x-forwarded-for': 'not-an-ip' });
  assert.deepEqual(ipsOf(API_TOKEN_REFUSED), ['127.0.0.1']);
  assert.ok(lines.every((l) => l.ip === undefined || l.ip === '127.0.0.1'), JSON.stringify(lines.map((l) => l.ip)));
});

test('an accepted client token costs no read of the address: /v1/me requests and a handshake to welcome parse no X-Forwarded-For, a refusal does', async (t) => {
  // With PIXIU_TRUST_PROXY each read of request.ip is a proxy-addr parse of the header
  // (fastify's lib/request.js calls proxyAddr.all): it was done on every /v1/me request
  // and twice per handshake, for a line only a refusal, or debug, writes (reread F4).
  const { server, logger, meRefused } = await node(t, { trustProxy: '127.0.0.1' });
  logger.level = 'info'; // as in production: the debug `connection open` is off
  const reads = t.mock.method(proxyaddr, 'all');
  const forwarded = { 'x-forwarded-for': FORWARDED };
  const token = await testToken(server.service.secrets.jwt, 'ann');
  for (let i = 0; i < 3; i++) {
    const answer = await server.client.get('/v1/me/messages', { headers: { authorization: `Bearer ${token}`, ...forwarded } });
    assert.equal(answer.status, 200);
  }
  const client = await TestClient.connect(server.service.url, { token, params: { device: 'd' }, headers: forwarded });
  t.after(() => client.close());
  await client.nextOf('welcome');
  assert.equal(reads.mock.callCount(), 0);
  await meRefused(forwarded);
  assert.ok(reads.mock.callCount() > 0, 'a refusal reads it: the spy sees fastify\'s reads');
});

test('a malformed PIXIU_TRUST_PROXY ends the start, naming the setting and the entry', async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const cases: Array<[string, RegExp]> = [
    ['10.0.0.0/33', /PIXIU_TRUST_PROXY="10\.0\.0\.0\/33" is not valid: "10\.0\.0\.0\/33" has no prefix length from 1 to 32 after its \//],
    ['127.0.0.1,proxy.internal', /PIXIU_TRUST_PROXY="127\.0\.0\.1,proxy\.internal" is not valid: "proxy\.internal" is not an IPv4 or IPv6 address or CIDR range/],
    ['true', /"true" is no proxy address: trusting every hop or a hop count would let any client choose the address logged for it/],
  ];
  for (const [value, expected] of cases) {
    const serve = spawnCli(['serve'], { PIXIU_TRUST_PROXY: value, PIXIU_REDIS_URL: redis.url, PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_PORT: '0' }, t);
    // Ended, or listening: a start that took the value runs until the test ends.
    const listening = serve.line((l) => listeningUrl(l) !== undefined, 'its listening line').then(() => 'listening' as const, () => 'exited' as const);
    const ended = await Promise.race([serve.exited, listening]);
    assert.deepEqual(ended, { code: 1, signal: null }, `${value}: ${serve.stdout()}${serve.stderr()}`);
    assert.match(serve.stderr(), /invalid configuration/, value);
    assert.match(serve.stderr(), expected, value);
  }
});
