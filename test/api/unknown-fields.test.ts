/**
 * Unknown query parameters and body fields (docs/api.md, "Input rules"; a typo in a
 * name is an error, not silently dropped):
 * - a query parameter is refused with 400 INVALID_REQUEST on every producer, admin and
 *   client route — also those that take no parameters at all — before anything is
 *   done; `/healthz`, `/readyz` and `/metrics` ignore them, since probes and scrapers
 *   call them with parameters of their own;
 * - a field in a JSON body is refused the same way, naming it, on every route that
 *   takes a body — producer, admin and client (`POST /v1/me/ack`) alike.
 * Also: every request schema the routes and batch items are validated by is valid JSON
 * Schema (the service's Ajv instances skip that check: src/api/route-validators.ts), and
 * fastify's own validator compiler, which the service replaces, is never loaded.
 * Against the real service on a real port and a private redis-server.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { Ajv } from 'ajv';
import { validatorSchemas } from '../../src/api/schema-cache.js';
import { messageBody } from '../../src/api/routes/message-schemas.js';
import { expectError } from '../harness/checks.js';
import { PixiuClient, cleanupList } from '../harness/pixiu-server.js';
import { testToken } from '../harness/ws-client.js';
import { startWithOwnRedis } from './api-fixture.js';

const JWT_SECRET = 'unknown-fields-tests-hs256-secret-of-32-chars';
const UNKNOWN = /querystring has an unknown field "x"/;
const UNKNOWN_FIELD = /body has an unknown field "extra"/;

let api: PixiuClient;
/** As user `quinn`, with a client JWT. */
let me: PixiuClient;
/** A stored message's id. */
let storedId: string;
const files = cleanupList();

before(async () => {
  const server = await startWithOwnRedis(files, { jwtSecret: JWT_SECRET });
  api = server.client;
  me = new PixiuClient(server.service.url, await testToken({ kind: 'secret', secret: JWT_SECRET }, 'quinn'));
  const posted = await api.post('/v1/messages', { to: 'quinn', type: 't', data: 1 });
  assert.equal(posted.status, 201, posted.text);
  storedId = (posted.body as { id: string }).id;
  assert.equal((await api.request('PUT', '/v1/rooms/qroom/members', { body: { users: ['quinn'] } })).status, 200);
});

after(() => files.run());

test('GET /v1/messages/{id}?x=1 is 400 INVALID_REQUEST naming x; without it, 200', async () => {
  expectError(await api.get(`/v1/messages/${storedId}?x=1`), 400, 'INVALID_REQUEST', UNKNOWN);
  assert.equal((await api.get(`/v1/messages/${storedId}`)).status, 200);
});

test('GET /v1/users/{uid}/presence?x=1 is 400 INVALID_REQUEST naming x; without it, 200', async () => {
  expectError(await api.get('/v1/users/quinn/presence?x=1'), 400, 'INVALID_REQUEST', UNKNOWN);
  assert.equal((await api.get('/v1/users/quinn/presence')).status, 200);
});

/** Every route that takes a JSON body, with a body it would take, and who may call it. */
function bodyRoutes(): Array<[string, string, Record<string, unknown>, PixiuClient?]> {
  return [
    ['POST', '/v1/messages', { to: 'nobody-yet', type: 't', data: 1 }],
    ['POST', '/v1/messages/batch', { messages: [{ to: 'nobody-yet', type: 't', data: 1 }] }],
    ['POST', '/v1/presence/query', { users: ['quinn'] }],
    ['PUT', '/v1/rooms/qroom/members', { users: ['nobody-yet'] }],
    ['DELETE', '/v1/rooms/qroom/members', { users: ['quinn'] }],
    ['POST', '/v1/broadcast', { type: 't', data: 1 }],
    ['POST', '/v1/channels/news/publish', { type: 't', data: 1 }],
    ['POST', '/v1/me/ack', { device: 'phone', seq: 1 }, me],
  ];
}

/** Nothing the refused requests of {@link bodyRoutes} would do was done: nothing stored, added, removed or acked. */
async function expectNothingDone(): Promise<void> {
  const history = await api.get('/v1/users/nobody-yet/messages');
  assert.equal((history.body as { epoch: unknown }).epoch, null, history.text);
  const members = await api.get('/v1/rooms/qroom/members');
  assert.deepEqual((members.body as { members: string[] }).members, ['quinn'], members.text);
  const record = await api.get(`/v1/messages/${storedId}`);
  assert.deepEqual((record.body as { recipients: unknown }).recipients, [{ user: 'quinn', seq: 1, acked_by: [] }]);
}

test('every other route that takes no query parameters refuses one, and does nothing', async () => {
  for (const [method, route, body, client = api] of bodyRoutes()) {
    expectError(await client.request(method, `${route}?x=1`, { body }), 400, 'INVALID_REQUEST', UNKNOWN);
  }
  await expectNothingDone();
});

test('the routes with query parameters still refuse unknown ones; /v1/me takes no ?token=', async () => {
  expectError(await api.get('/v1/users/quinn/messages?x=1'), 400, 'INVALID_REQUEST', UNKNOWN);
  expectError(await api.request('DELETE', '/v1/users/quinn/connections?x=1'), 400, 'INVALID_REQUEST', UNKNOWN);
  expectError(await api.get('/v1/rooms/qroom/members?x=1'), 400, 'INVALID_REQUEST', UNKNOWN);
  expectError(await me.get('/v1/me/messages?x=1'), 400, 'INVALID_REQUEST', UNKNOWN);
  // The JWT goes in the Authorization header on /v1/me (only /v1/connect reads ?token=).
  expectError(await me.get('/v1/me/messages?token=abc'), 400, 'INVALID_REQUEST', /unknown field "token"/);
});

test('a missing token is still 401 before the query is looked at', async () => {
  expectError(await api.get(`/v1/messages/${storedId}?x=1`, { headers: { authorization: '' } }), 401, 'UNAUTHORIZED');
});

test('/healthz, /readyz and /metrics ignore query parameters (probes and scrapers add their own)', async () => {
  const open = { headers: { authorization: '' } };
  const health = await api.get('/healthz?x=1&probe=k8s', open);
  assert.equal(health.status, 200, health.text);
  assert.deepEqual(health.body, { status: 'ok' });
  const ready = await api.get('/readyz?x=1', open);
  assert.equal(ready.status, 200, ready.text);
  assert.deepEqual(ready.body, { status: 'ready' });
  const metrics = await api.get('/metrics?name[]=pixiu_ws_connections', open);
  assert.equal(metrics.status, 200, metrics.text);
  assert.match(metrics.headers.get('content-type') ?? '', /^text\/plain/);
  assert.match(metrics.text, /^# TYPE pixiu_ws_connections gauge$/m);
});

// Last: it acks, which the checks of nothing done above would see.
test('every route that takes a JSON body refuses an unknown field in it, naming it, and does nothing', async () => {
  for (const [method, route, body, client = api] of bodyRoutes()) {
    expectError(await client.request(method, route, { body: { ...body, extra: true } }), 400, 'INVALID_REQUEST', UNKNOWN_FIELD);
  }
  await expectNothingDone();
  // The same bodies without the field are taken (the refusal was the field's).
  const ack = await me.post('/v1/me/ack', { device: 'phone', seq: 1 });
  assert.equal(ack.status, 200, ack.text);
});

test('every request schema of the routes, and a batch item\'s, is valid JSON Schema (draft-07, as Ajv reads it)', () => {
  const meta = new Ajv({ strict: false });
  const valid = (schema: unknown): boolean => meta.validateSchema(schema as object) === true;
  // The check can fail: a schema with a keyword of the wrong type is refused.
  assert.equal(valid({ type: 'object', properties: { to: { type: 'string', minLength: 'one' } } }), false);
  const schemas = [...validatorSchemas(), { part: 'body', schema: messageBody }];
  assert.ok(schemas.filter((s) => s.part === 'body').length >= 8, `${schemas.length} schemas`);
  assert.ok(schemas.filter((s) => s.part === 'text').length >= 8, `${schemas.length} schemas`);
  for (const { part, schema } of schemas) assert.ok(valid(schema), `${part} ${JSON.stringify(schema).slice(0, 200)}: ${meta.errorsText()}`);
});

test('the service replaces fastify\'s validator compiler without loading it (@fastify/ajv-compiler, Ajv\'s JTD build)', () => {
  const loaded = Object.keys(createRequire(import.meta.url).cache);
  assert.ok(loaded.some((file) => file.includes('fastify/lib/schema-controller')), 'fastify\'s schema controller is loaded');
  assert.deepEqual(loaded.filter((file) => file.includes('@fastify/ajv-compiler') || file.includes('ajv/dist/jtd')), []);
});
