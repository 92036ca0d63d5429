/**
 * `pixiu_http_errors_total{code}` counts every error answer, by code (docs/api.md
 * "Operations"), whichever part of the stack answers it: the error handler, the
 * not-found handler, Node's parser (clientErrorAnswerer), a bad Expect (417) — and the
 * router's own refusals answered through fastify's `frameworkErrors` (a URL that is
 * not validly percent-encoded, a path parameter over the length limit), which are
 * answered with the catalogue's body but were never counted; on `POST /v1/messages…`
 * they are refused messages too.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { expectError, metricSample } from '../harness/checks.js';
import { cleanupList, type InProcessServer } from '../harness/pixiu-server.js';
import { startWithOwnRedis } from './api-fixture.js';

const files = cleanupList();
let server: InProcessServer;

before(async () => {
  server = await startWithOwnRedis(files);
});

after(() => files.run());

async function invalidRequests(): Promise<number> {
  const text = (await server.client.get('/metrics')).text;
  return metricSample(text, 'pixiu_http_errors_total{code="INVALID_REQUEST"}') ?? 0;
}

test('a URL refused (bad percent-encoding in its path or query, over-long parameter) counts in pixiu_http_errors_total', async () => {
  const before = await invalidRequests();
  expectError(await server.client.get('/v1/users/%zz/messages'), 400, 'INVALID_REQUEST', /percent-encoded/);
  expectError(await server.client.get('/v1/messages/%c3%28'), 400, 'INVALID_REQUEST', /percent-encoded/);
  // The query too: a bad escape is refused, not read as its raw text.
  expectError(await server.client.get('/v1/users/a/messages?after_seq=%ZZ'), 400, 'INVALID_REQUEST', /percent-encoded/);
  expectError(await server.client.get('/v1/users/a/messages?x=%FF'), 400, 'INVALID_REQUEST', /percent-encoded/);
  assert.equal((await server.client.get('/v1/users/a/messages?limit=%31')).status, 200, 'a good escape is decoded');
  expectError(await server.client.get(`/v1/users/${'a'.repeat(2000)}/messages`), 400, 'INVALID_REQUEST');
  // The same answers from the schema are counted, as a check of the counter itself.
  expectError(await server.client.get('/v1/users/a/messages?limit=0'), 400, 'INVALID_REQUEST');
  assert.equal(await invalidRequests() - before, 6, 'each 400 answered counts once');
});

test('a request to no route (404 from the not-found handler) counts in pixiu_http_errors_total', async () => {
  const notFound = async (): Promise<number> =>
    metricSample((await server.client.get('/metrics')).text, 'pixiu_http_errors_total{code="NOT_FOUND"}') ?? 0;
  const before = await notFound();
  expectError(await server.client.get('/v1/nothing-here'), 404, 'NOT_FOUND');
  expectError(await server.client.request('DELETE', '/v1/messages'), 404, 'NOT_FOUND');
  assert.equal(await notFound() - before, 2, 'each 404 answered counts once');
});
