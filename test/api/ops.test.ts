/**
 * The operations routes (DESIGN.md §7): liveness, readiness, Prometheus metrics and
 * the OpenAPI document, against the real service on a real port.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { RedisServer } from '../harness/redis-server.js';
import { startInProcess } from '../harness/pixiu-server.js';
import { metricSample } from '../harness/checks.js';
import { dereferenced } from './openapi-refs.js';

let redis: RedisServer;

before(async () => {
  redis = await RedisServer.start();
});

after(async () => {
  await redis?.destroy();
});

/** The value of one sample line of a Prometheus text exposition, or undefined. */

test('/healthz and /readyz answer 200 without a token', async (t) => {
  const { client } = await startInProcess(t, { redisUrl: redis.url });
  const noToken = { headers: { authorization: '' } };
  const health = await client.get('/healthz', noToken);
  assert.equal(health.status, 200);
  assert.deepEqual(health.body, { status: 'ok' });
  const ready = await client.get('/readyz', noToken);
  assert.equal(ready.status, 200);
  assert.deepEqual(ready.body, { status: 'ready' });
});

test('/metrics counts ingest outcomes, store batches and Redis errors, with the default process metrics', async (t) => {
  const { client } = await startInProcess(t, { redisUrl: redis.url, redisPrefix: 'metrics:' });
  const message = { to: ['mia', 'noa'], type: 't', data: 1 };
  for (let i = 0; i < 3; i++) assert.equal((await client.post('/v1/messages', message)).status, 201);
  assert.equal((await client.post('/v1/messages', { ...message, client_msg_id: 'm' })).status, 201);
  assert.equal((await client.post('/v1/messages', { ...message, client_msg_id: 'm' })).status, 200);
  assert.equal((await client.post('/v1/messages', { ...message, data: 'x'.repeat(70_000) })).status, 413);
  // Refused before the handler ran (schema, JSON, token): counted all the same, by code.
  assert.equal((await client.post('/v1/messages', { ...message, to: 'a b' })).status, 400);
  assert.equal((await client.post('/v1/messages', '{"to":')).status, 400);
  assert.equal((await client.post('/v1/messages', message, { headers: { authorization: 'Bearer wrong' } })).status, 401);
  assert.equal((await client.post('/v1/messages/batch', { messages: [message, { room: 'r', type: 't', data: 1 }] })).status, 200);

  const answer = await client.get('/metrics', { headers: { authorization: '' } });
  assert.equal(answer.status, 200);
  assert.match(answer.headers.get('content-type') ?? '', /^text\/plain/);
  const text = answer.text;
  const ingest = (route: string, outcome: string): number | undefined =>
    metricSample(text, `pixiu_ingest_messages_total{route="${route}",outcome="${outcome}"}`);
  assert.equal(ingest('message', 'created'), 4);
  assert.equal(ingest('message', 'duplicate'), 1);
  assert.equal(ingest('message', 'PAYLOAD_TOO_LARGE'), 1);
  assert.equal(ingest('message', 'INVALID_REQUEST'), 2);
  assert.equal(ingest('message', 'UNAUTHORIZED'), 1);
  assert.equal(ingest('batch', 'created'), 1);
  assert.equal(ingest('batch', 'NOT_FOUND'), 1);
  // Timed: the requests answered 201 or 200 (four stored, one duplicate) and the batch
  // answered 200; none of the refused ones, wherever they were refused (ops F2: the 413
  // refused in the handler was timed, the others not).
  assert.equal(metricSample(text, 'pixiu_ingest_duration_seconds_count{route="message"}'), 5);
  assert.equal(metricSample(text, 'pixiu_ingest_duration_seconds_count{route="batch"}'), 1);
  // Five records written: the five new messages; not the duplicate, whose lookup rides
  // a batch but writes nothing, nor the refused ones.
  assert.equal(metricSample(text, 'pixiu_store_batch_size_sum'), 5);
  assert.ok((metricSample(text, 'pixiu_store_batch_size_count') ?? 0) >= 1);
  assert.match(text, /^# TYPE pixiu_store_batch_duration_seconds histogram$/m);
  assert.match(text, /^# TYPE pixiu_redis_errors_total counter$/m);
  assert.ok((metricSample(text, 'pixiu_process_cpu_user_seconds_total') ?? 0) > 0, 'default process metrics');
  assert.ok((metricSample(text, 'pixiu_nodejs_heap_size_total_bytes') ?? 0) > 0, 'default Node metrics');
  assert.match(text, /^pixiu_nodejs_eventloop_lag_p99_seconds /m);
});

test('pixiu_store_batch_size counts records written: a message retried 200 duplicate or 409 writes nothing and moves neither store histogram', async (t) => {
  const { client } = await startInProcess(t, { redisUrl: redis.url, redisPrefix: 'batch-size:' });
  const store = async (): Promise<number[]> => {
    const text = (await client.get('/metrics', { headers: { authorization: '' } })).text;
    return ['pixiu_store_batch_size_sum', 'pixiu_store_batch_size_count', 'pixiu_store_batch_duration_seconds_count'].map((name) => metricSample(text, name) ?? 0);
  };
  const message = { to: ['pia', 'quin'], type: 't', data: { n: 1 }, client_msg_id: 'bs-1' };
  assert.equal((await client.post('/v1/messages', message)).status, 201);
  const afterFirst = await store();
  assert.equal(afterFirst[0], 1, 'one record written');
  for (let i = 0; i < 5; i++) assert.equal((await client.post('/v1/messages', message)).status, 200);
  for (let i = 0; i < 3; i++) assert.equal((await client.post('/v1/messages', { ...message, data: { n: 2 } })).status, 409);
  assert.equal((await client.post('/v1/broadcast', { type: 't', data: 1, client_msg_id: 'bs-1' })).status, 409);
  const batch = await client.post('/v1/messages/batch', { messages: [message, { ...message, client_msg_id: 'bs-2' }] });
  assert.deepEqual((batch.body as { results: { status: number }[] }).results.map((r) => r.status), [200, 201]);
  const [sum, count, timed] = await store();
  assert.equal(sum, (afterFirst[0] ?? 0) + 1, 'only the batch\'s new message');
  assert.equal(count, (afterFirst[1] ?? 0) + 1, 'one more batch that wrote');
  assert.equal(timed, count, 'the durations of the same batches');
});

test('/metrics counts broadcasts and channel publications in the ingest metrics, by outcome, refusals included', async (t) => {
  const { client } = await startInProcess(t, { redisUrl: redis.url, redisPrefix: 'metrics-bc:' });
  const scrape = async (): Promise<string> => (await client.get('/metrics', { headers: { authorization: '' } })).text;
  const fresh = await scrape();
  for (const route of ['broadcast', 'channel']) {
    for (const outcome of ['created', 'duplicate']) assert.equal(metricSample(fresh, `pixiu_ingest_messages_total{route="${route}",outcome="${outcome}"}`), 0, `${route} ${outcome} from the start`);
    assert.equal(metricSample(fresh, `pixiu_ingest_duration_seconds_count{route="${route}"}`), 0, `${route} timed from the start`);
  }
  const broadcast = { type: 'b', data: 1 };
  assert.equal((await client.post('/v1/broadcast', broadcast)).status, 201);
  assert.equal((await client.post('/v1/broadcast', { ...broadcast, client_msg_id: 'b1' })).status, 201);
  assert.equal((await client.post('/v1/broadcast', { ...broadcast, client_msg_id: 'b1' })).status, 200);
  assert.equal((await client.post('/v1/broadcast', { ...broadcast, data: 2, client_msg_id: 'b1' })).status, 409);
  assert.equal((await client.post('/v1/broadcast', { data: 1 })).status, 400);
  assert.equal((await client.post('/v1/broadcast', broadcast, { headers: { authorization: 'Bearer wrong' } })).status, 401);
  const publication = { type: 'p', data: 1 };
  assert.equal((await client.post('/v1/channels/news/publish', publication)).status, 201);
  assert.equal((await client.post('/v1/channels/news/publish', { ...publication, client_msg_id: 'p1' })).status, 201);
  assert.equal((await client.post('/v1/channels/news/publish', { ...publication, client_msg_id: 'p1' })).status, 200);
  assert.equal((await client.post('/v1/channels/news/publish', { ...publication, data: 2, client_msg_id: 'p1' })).status, 409);
  assert.equal((await client.post('/v1/channels/news/publish', { ...publication, data: 'x'.repeat(70_000) })).status, 413);
  assert.equal((await client.post('/v1/channels/a%20b/publish', publication)).status, 400);
  // Refused by the router (a path that is not validly percent-encoded): told by its path.
  assert.equal((await client.post('/v1/channels/%zz/publish', publication)).status, 400);
  const text = await scrape();
  const counted = (route: string): Record<string, number> => Object.fromEntries([...text.matchAll(
    new RegExp(`^pixiu_ingest_messages_total\\{route="${route}",outcome="(\\w+)"\\} (\\d+)`, 'gm'))].map((m) => [m[1], Number(m[2])]));
  assert.deepEqual(counted('broadcast'), { created: 2, duplicate: 1, abandoned: 0, CONFLICT: 1, INVALID_REQUEST: 1, UNAUTHORIZED: 1 });
  assert.deepEqual(counted('channel'), { created: 2, duplicate: 1, CONFLICT: 1, PAYLOAD_TOO_LARGE: 1, INVALID_REQUEST: 2 });
  // Timed when published or found published only.
  assert.equal(metricSample(text, 'pixiu_ingest_duration_seconds_count{route="broadcast"}'), 3);
  assert.equal(metricSample(text, 'pixiu_ingest_duration_seconds_count{route="channel"}'), 3);
});

test('GET /v1/openapi.json lists every route with its methods', async (t) => {
  const { client } = await startInProcess(t, { redisUrl: redis.url });
  const answer = await client.get('/v1/openapi.json', { headers: { authorization: '' } });
  assert.equal(answer.status, 200);
  // Read with its $refs resolved (the shared shapes are components: openapi-refs.ts).
  const doc = dereferenced(answer.body) as { openapi: string; paths: Record<string, Record<string, unknown>>; components: { securitySchemes: Record<string, unknown> } };
  assert.match(doc.openapi, /^3\./);
  const routes = Object.entries(doc.paths).flatMap(([p, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${p}`));
  for (const route of [
    'POST /v1/messages', 'POST /v1/messages/batch', 'GET /v1/messages/{id}', 'GET /v1/users/{uid}/messages',
    'GET /healthz', 'GET /readyz', 'GET /metrics',
  ]) assert.ok(routes.includes(route), `${route} in ${routes.join(', ')}`);
  assert.deepEqual(Object.entries(doc.components.securitySchemes.apiToken ?? {}).filter(([k]) => k !== 'description'),
    [['type', 'http'], ['scheme', 'bearer']]);
  // A message to users or to a room: each form requires its address, type and data.
  const post = doc.paths['/v1/messages']?.post as { requestBody?: { content?: Record<string, { schema?: { oneOf?: Array<{ required?: string[] }> } }> } };
  assert.deepEqual(post.requestBody?.content?.['application/json']?.schema?.oneOf?.map((s) => s.required), [['to', 'type', 'data'], ['room', 'type', 'data']]);
});
