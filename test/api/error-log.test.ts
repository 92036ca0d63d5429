/**
 * How failed requests are logged (docs/api.md): a 503 UNAVAILABLE (Redis or another
 * node down: expected, answered with Retry-After) is a warning naming the reason and
 * its cause, with no stack, and so are the warnings of background work the outage
 * fails; only 500 INTERNAL (a bug) is an error with the stack, and its answer tells
 * the client nothing of it.
 * The real service in this process, its log captured from a pino destination.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import Fastify, { type FastifyBaseLogger } from 'fastify';
import { pino, type Logger } from 'pino';
import { installErrorHandlers } from '../../src/api/error-handler.js';
import { loadConfig } from '../../src/config/config.js';
import { startService } from '../../src/service/service.js';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList, PixiuClient, tempDataDir } from '../harness/pixiu-server.js';
import { expectError, metricSample, waitUntil } from '../harness/checks.js';
import { capturingLogger, duplicateKeys, type LogLine } from '../harness/log-capture.js';
import { Refused, TestClient, testToken } from '../harness/ws-client.js';
import { rawRequest } from '../harness/raw-http.js';

const JWT_SECRET = 'error-log-tests-hs256-secret-of-32-chars';
let redis: RedisServer;
let serviceUrl: string;
let client: PixiuClient;
let lines: LogLine[];
/** The captured lines as written (for the duplicate-key check). */
let texts: string[];
const files = cleanupList();

before(async () => {
  // With its AOF, as production runs it: the tests below stop and restart it, and one
  // that came back empty would have the node log at error (Redis lost its data: the
  // store's claim gone) at its next lease renewal, during whichever test runs then.
  redis = await RedisServer.start({ aof: true });
  files.after(() => redis.destroy());
  const dataDir = await tempDataDir(files);
  const config = loadConfig({}, { port: '0', claimsSettleMs: '0', dataDir, redisUrl: redis.url, redisCommandTimeoutMs: '300', jwtSecret: JWT_SECRET, heartbeatMs: '300' });
  const captured = capturingLogger();
  lines = captured.lines;
  texts = captured.texts;
  const service = await startService(config, captured.logger);
  files.after(() => service.close());
  client = new PixiuClient(service.url, service.secrets.apiToken);
  serviceUrl = service.url;
});

after(() => files.run());

test('a 503 UNAVAILABLE (Redis down) is logged at warn with its reason and cause, without a stack', async () => {
  assert.equal((await client.get('/v1/users/ada/messages')).status, 200);
  await redis.stop();
  const from = lines.length;
  let batch;
  try {
    expectError(await client.get('/v1/users/ada/messages'), 503, 'UNAVAILABLE');
    // More of the same in the outage: answered alike, not logged again (log-throttle.ts).
    expectError(await client.get('/v1/users/ada/messages'), 503, 'UNAVAILABLE');
    expectError(await client.get('/v1/users/bob/messages'), 503, 'UNAVAILABLE');
    batch = await client.post('/v1/messages/batch', { messages: [{ to: 'ada', type: 't', data: 1 }, { to: 'bob', type: 't', data: 2 }, { to: 'cy', type: 't', data: 3 }] });
    // Another batch in the same outage: answered alike, not logged again.
    assert.equal((await client.post('/v1/messages/batch', { messages: [{ to: 'ada', type: 't', data: 4 }] })).status, 200);
  } finally {
    await redis.restart();
  }
  assert.equal(batch.status, 200, batch.text);
  const logged = lines.slice(from);
  // Batch items that fail on the outage are logged the same way, one line per batch
  // (the first item's index and reason, and how many), thinned across batches.
  assert.deepEqual((batch.body as { results: { status: number }[] }).results.map((r) => r.status), [503, 503, 503]);
  const items = logged.filter((l) => l.msg === 'batch items unavailable');
  assert.equal(items.length, 1, JSON.stringify(logged));
  const [item] = items;
  assert.ok(item !== undefined);
  assert.equal(item.level, 40, 'warn');
  assert.equal(item.item, 0);
  assert.equal(item.items, 3);
  assert.deepEqual([item.method, item.route], ['POST', '/v1/messages/batch']);
  assert.equal(item.code, 'UNAVAILABLE');
  assert.ok(!JSON.stringify(item).includes('"stack"'), `no stack: ${JSON.stringify(item)}`);
  assert.ok(!logged.some((l) => l.msg === 'batch item failed'), 'not an error');
  assert.equal(logged.filter((l) => l.msg === 'request unavailable').length, 1, 'one line for the three 503s');
  const warn = logged.find((l) => l.msg === 'request unavailable');
  assert.ok(warn !== undefined, JSON.stringify(logged));
  assert.equal(warn.level, 40, 'warn');
  assert.equal(warn.code, 'UNAVAILABLE');
  assert.equal(typeof warn.reason, 'string');
  // Which request, by its route's pattern (no user id), as the 401 warning names it (walk26 L1).
  assert.deepEqual([warn.method, warn.route], ['GET', '/v1/users/:uid/messages']);
  // The cause in plain words, not the Redis client's options (an ops newcomer's finding).
  assert.match(String(warn.cause), /^Redis connection lost/, JSON.stringify(warn));
  const internals = logged.filter((l) => /enableOfflineQueue|maxRetriesPerRequest/.test(JSON.stringify(l)));
  assert.deepEqual(internals, [], 'no line names the Redis client\'s options');
  assert.ok(!JSON.stringify(warn).includes('"stack"'), `no stack: ${JSON.stringify(warn)}`);
  const errors = logged.filter((l) => l.level >= 50 && l.msg === 'request failed');
  assert.deepEqual(errors, [], 'no error-level request log for a 503');
});

test('background work that an outage fails warns with its reason, without a stack', async () => {
  // Back from the test before first: a client still failing to reconnect logs no new
  // warning for the same error (createRedis logs changes, not repeats).
  await waitUntil('the service is ready again', async () => (await client.get('/readyz')).status === 200, 15_000);
  await redis.stop();
  const from = lines.length;
  try {
    // The clients' reconnect attempts fail while Redis is away: one warning each.
    await waitUntil('a redis connection error is logged', async () => lines.slice(from).some((l) => l.msg === 'redis connection error'), 10_000);
  } finally {
    await redis.restart();
  }
  const background = lines.slice(from).filter((l) => l.level === 40);
  const connection = background.find((l) => l.msg === 'redis connection error');
  assert.equal(typeof connection?.reason, 'string', JSON.stringify(connection));
  const withStack = background.filter((l) => JSON.stringify(l).includes('"stack"'));
  assert.deepEqual(withStack, [], 'no stack in an outage warning');
});

test('ack cursor writes and delivery pulls an outage fails for several users are one warning each, not one per user', async () => {
  await waitUntil('the service is ready again', async () => (await client.get('/readyz')).status === 200, 15_000);
  const users = ['cy', 'di', 'ed'];
  const devices = await Promise.all(users.map(async (user) => {
    const device = await TestClient.connect(serviceUrl, { token: await testToken({ kind: 'secret', secret: JWT_SECRET }, user), params: { device: 'phone' } });
    await device.nextOf('welcome');
    return device;
  }));
  try {
    for (const user of users) assert.equal((await client.post('/v1/messages', { to: user, type: 't', data: 1 })).status, 201);
    const received = await Promise.all(devices.map((d) => d.msgs(1)));
    const from = lines.length;
    const fetches = async (): Promise<number> => metricSample(await metricsText(), 'pixiu_delivery_fetches_total') ?? 0;
    const fetchesBefore = await fetches();
    const inboxFailures = async (): Promise<number> => metricSample(await metricsText(), 'pixiu_delivery_fetch_failures_total{read="inbox"}') ?? NaN;
    const stalled = async (): Promise<number> => metricSample(await metricsText(), 'pixiu_delivery_stalled_users') ?? NaN;
    const failuresBefore = await inboxFailures();
    assert.equal(await stalled(), 0);
    await redis.stop();
    try {
      // Acked once Redis is gone: the acks are held for the next round (100 ms), which
      // fails. (Acked before the stop, the round could beat a slow stop and succeed.)
      devices.forEach((d, i) => d.ack(received[i]?.[0]?.seq as number));
      await waitUntil('an ack write failure is logged', async () => lines.slice(from).some((l) => l.msg === ACK_FAILED), 10_000);
      // Every device's heartbeat (300 ms here) pulls its inbox, and fails.
      await waitUntil('each session pulled in the outage', async () => await fetches() >= fetchesBefore + 2 * users.length, 10_000);
      // A pull is counted when it starts and logged when it fails: on a busy machine the
      // count was reached before any failure was logged.
      await waitUntil('a pull failure is logged', async () => lines.slice(from).some((l) => l.msg === FETCH_FAILED && l.level === 40), 10_000);
      // The round's other writes failed with it; a request's round trip lets their settling run.
      await client.get('/healthz');
      const logged = lines.slice(from);
      const ackWarnings = logged.filter((l) => l.msg === ACK_FAILED && l.level === 40);
      assert.equal(ackWarnings.length, 1, JSON.stringify(logged));
      assert.equal(logged.filter((l) => l.msg === FETCH_FAILED && l.level === 40).length, 1, JSON.stringify(logged));
      // Each names what failed, as the outage's other warnings do (docs/api.md, 503 row):
      // the reason, no stack; the writes the thinning left out are debug lines.
      const fetchWarning = logged.find((l) => l.msg === FETCH_FAILED && l.level === 40) as LogLine;
      const ackWarning = ackWarnings[0] as LogLine;
      assert.equal(typeof fetchWarning.reason, 'string', JSON.stringify(fetchWarning));
      assert.equal(typeof ackWarning.reason, 'string', JSON.stringify(ackWarning));
      assert.ok(users.includes(String(ackWarning.user)), JSON.stringify(ackWarning));
      assert.equal(ackWarning.devices, 1, JSON.stringify(ackWarning));
      assert.equal(JSON.stringify(ackWarning).includes('"stack"'), false, 'no stack');
      assert.ok(logged.filter((l) => l.msg === ACK_FAILED).every((l) => l.level === 40 || (l.level === 20 && typeof l.reason === 'string')), JSON.stringify(logged));
      // The metrics show it too: the failed inbox reads, and every user waiting.
      await waitUntil('the three users are stalled', async () => await stalled() === users.length, 10_000);
      assert.ok(await inboxFailures() >= failuresBefore + users.length);
    } finally {
      await redis.restart();
    }
    await waitUntil('no user is stalled once Redis is back', async () => await stalled() === 0, 10_000);
  } finally {
    await Promise.all(devices.map((d) => d.close()));
  }
});

const ACK_FAILED = 'ack cursor write failed, will retry';
const FETCH_FAILED = 'delivery fetch failed, will retry';

/** The service's /metrics text. */
async function metricsText(): Promise<string> {
  return (await client.get('/metrics')).text;
}

test('a 500 INTERNAL is still logged at error with the stack, and its answer says nothing of the fault', async () => {
  const { logger, lines: own } = capturingLogger();
  const app = Fastify({ loggerInstance: logger as FastifyBaseLogger });
  installErrorHandlers(app);
  app.get('/boom', async () => { throw new TypeError('a bug'); });
  try {
    const answer = await app.inject({ method: 'GET', url: '/boom' });
    assert.equal(answer.statusCode, 500);
    // The log has the fault; the client only the catalogue's words (docs/api.md).
    assert.deepEqual(answer.json(), { error: { code: 'INTERNAL', message: 'internal error' } });
    const line = own.find((l) => l.msg === 'request failed');
    assert.ok(line !== undefined, JSON.stringify(own));
    assert.equal(line.level, 50);
    assert.match(String((line.err as { stack?: unknown }).stack), /TypeError: a bug/);
  } finally {
    await app.close();
  }
});

test('a 501 NOT_IMPLEMENTED (a transfer coding Pixiu does not take) is the client\'s doing: not logged at error', async () => {
  const before = lines.length;
  const url = new URL(serviceUrl);
  const body = '{"to":"coded","type":"x","data":1}';
  const answer = await new Promise<string>((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname, () => {
      socket.write(`POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${client.token}\r\nContent-Type: application/json\r\n`
        + `Transfer-Encoding: gzip, chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`);
    });
    let text = '';
    socket.on('data', (chunk: Buffer) => { text += chunk.toString('latin1'); });
    socket.on('close', () => resolve(text));
    socket.on('error', reject);
  });
  assert.match(answer, /^HTTP\/1\.1 501 /, answer);
  const errors = lines.slice(before).filter((l) => l.level >= 50);
  assert.deepEqual(errors, [], 'nothing at error or above');
});

test('a request refused for the client\'s fault is one debug line with its reason in `reason`, not a second `msg` key', async () => {
  const from = texts.length;
  expectError(await client.post('/v1/messages', { to: 'ada', data: 1 }), 400, 'INVALID_REQUEST', /"type"/);
  // A WebSocket handshake with a token this node's key does not verify.
  const badToken = await testToken({ kind: 'secret', secret: 'another-secret-of-thirty-two-chars!!' }, 'ada');
  await assert.rejects(TestClient.connect(serviceUrl, { token: badToken, params: { device: 'phone' } }), (err: unknown) => err instanceof Refused && err.status === 401);
  await client.get('/healthz');
  const written = texts.slice(from);
  // pino's message and a field named msg were both written as "msg": the reason was lost to every JSON reader.
  assert.deepEqual(written.filter((text) => duplicateKeys(text).length > 0), [], 'no line with a key twice');
  const rejected = written.map((text) => JSON.parse(text) as LogLine).filter((l) => l.msg === 'request rejected');
  assert.deepEqual(rejected.map((l) => [l.level, l.code]), [[20, 'INVALID_REQUEST'], [20, 'UNAUTHORIZED']], JSON.stringify(rejected));
  assert.match(String(rejected[0]?.reason), /"type"/);
  assert.match(String(rejected[1]?.reason), /^invalid token/);
});

test('an unknown route, a bad URL and a request the HTTP parser refuses are `request rejected` debug lines too, as README "Commands" says', async () => {
  const from = lines.length;
  expectError(await client.get('/nope'), 404, 'NOT_FOUND', /^no route GET \/nope$/);
  expectError(await client.get('/v1/messages/%zz'), 400, 'INVALID_REQUEST');
  assert.equal((await rawRequest(serviceUrl, 'NOT HTTP\r\n\r\n')).status, 400);
  assert.equal((await rawRequest(serviceUrl, `CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n`, { waitMs: 2_000 })).status, 404);
  assert.equal((await rawRequest(serviceUrl, 'GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nConnection: close\r\n\r\n')).status, 417);
  const rejected = lines.slice(from).filter((l) => l.msg === 'request rejected');
  assert.deepEqual(rejected.map((l) => [l.level, l.code]),
    [[20, 'NOT_FOUND'], [20, 'INVALID_REQUEST'], [20, 'INVALID_REQUEST'], [20, 'NOT_FOUND'], [20, 'EXPECTATION_FAILED']], JSON.stringify(rejected));
  assert.equal(rejected[0]?.reason, 'no route GET /nope');
  assert.match(String(rejected[2]?.reason), /not valid HTTP\/1\.1/);
});

test('a 404 for a path a route has with other methods names them, those of a literal route over a parameter\'s; the answer stays 404 NOT_FOUND', async () => {
  expectError(await client.post('/v1/rooms/lobby/members', { users: ['alice'] }), 404, 'NOT_FOUND',
    /^no route POST \/v1\/rooms\/lobby\/members: this path takes GET, PUT, DELETE$/);
  expectError(await client.request('PATCH', '/v1/messages'), 404, 'NOT_FOUND', /^no route PATCH \/v1\/messages: this path takes POST$/);
  // A literal route wins over a parameter's match: GET /v1/messages/{id} matches batch too.
  expectError(await client.request('PUT', '/v1/messages/batch'), 404, 'NOT_FOUND', /^no route PUT \/v1\/messages\/batch: this path takes POST$/);
  expectError(await client.request('PUT', '/v1/messages/0001000000000001'), 404, 'NOT_FOUND', /^no route PUT \/v1\/messages\/0001000000000001: this path takes GET$/);
  expectError(await client.get('/v1/rooms/lobby/nope'), 404, 'NOT_FOUND', /^no route GET \/v1\/rooms\/lobby\/nope$/);
});

test('a 404 for a path with an empty segment says so, and names the path it most likely meant and its methods', async () => {
  // An id left out: the route whose parameter sits there (fastify routes GET there, refused 400).
  expectError(await client.post('/v1/users//messages', { type: 't', data: 1 }), 404, 'NOT_FOUND',
    /^no route POST \/v1\/users\/\/messages: the path has an empty segment \("\/\/"\) where \/v1\/users\/\{uid\}\/messages has \{uid\}; that path takes GET$/);
  // A slash too many: the path without it, whose methods may include the one sent.
  expectError(await client.post('/v1/messages/', { to: 'a', type: 't', data: 1 }), 404, 'NOT_FOUND',
    /^no route POST \/v1\/messages\/: the path ends in "\/"; \/v1\/messages takes POST$/);
  expectError(await client.post('/v1//messages/batch', { messages: [] }), 404, 'NOT_FOUND',
    /^no route POST \/v1\/\/messages\/batch: the path has an empty segment \("\/\/"\); \/v1\/messages\/batch takes POST$/);
  expectError(await client.get('/v1/nope//x'), 404, 'NOT_FOUND', /^no route GET \/v1\/nope\/\/x: the path has an empty segment \("\/\/"\)$/);
  expectError(await client.get('/nope'), 404, 'NOT_FOUND', /^no route GET \/nope$/);
});
