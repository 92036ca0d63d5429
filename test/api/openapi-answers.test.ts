/**
 * Real answers against the served OpenAPI document (`GET /v1/openapi.json`), as a
 * client generated from it would read them: every documented route's success and
 * error answers, each body validated with Ajv (JSON Schema 2020-12, as OpenAPI 3.1
 * reads schemas) against the schema the document gives its status (the status itself,
 * else its class, `4XX`), and each header the document declares there checked against
 * its schema: `WWW-Authenticate` on every 401, `Retry-After` on every 503 and on a
 * batch's 200 when an item is 503 (an audit found none declared). A schema's `$ref`s
 * to the document's `components.schemas` are resolved by Ajv. The real service on a
 * real port, with a private redis-server, which the last test freezes for the 503s.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { cleanupList, PixiuClient, REPO_ROOT, startInProcessAlone, type HttpAnswer, type InProcessServer } from '../harness/pixiu-server.js';
import type { RedisServer } from '../harness/redis-server.js';
import { testToken } from '../harness/ws-client.js';
import { holdHistoryBudget, openInbox, waitUntil } from '../harness/checks.js';
import { HISTORY_BYTES_PER_USER } from '../../src/api/history-budget.js';
import { dereferenced } from './openapi-refs.js';
import { lastAnswer, parseAnswer, rawRequest } from '../harness/raw-http.js';
import { PIPELINE_BOUNDS } from '../../src/api/pipeline-bounds.js';

const JWT_SECRET = 'openapi-answers-hs256-secret-of-32-chars-or-more';

/** A response of the document: its schema by media type and its headers. */
interface DocResponse {
  description?: string;
  content?: Record<string, { schema?: object }>;
  headers?: Record<string, { schema: object }>;
}
interface Document {
  paths: Record<string, Record<string, { responses: Record<string, DocResponse> }>>;
  components: { schemas: Record<string, object> };
}

const files = cleanupList();
let redis: RedisServer;
let server: InProcessServer;
let api: PixiuClient;
let doc: Document;
const ajv = new Ajv2020({ strict: false, allErrors: true });
/** The routes {@link conforms} has checked an answer of. */
const checked = new Set<string>();

before(async () => {
  // A short command timeout: the 503s of the last test come quickly.
  ({ redis, server } = await startInProcessAlone(files, { jwtSecret: JWT_SECRET, redisCommandTimeoutMs: '300' }));
  api = server.client;
  const answer = await api.get('/v1/openapi.json');
  assert.equal(answer.status, 200);
  doc = answer.body as Document;
});

after(() => files.run());

/**
 * The answer to `request`, written raw on a new connection (what fetch cannot send: a
 * body on a GET, a fragment, a request line over the header limit), read until the server closes it or
 * its answer is whole. One answer, JSON or not.
 */
async function rawAnswer(request: string): Promise<HttpAnswer> {
  const socket = net.connect(Number(new URL(server.service.url).port), '127.0.0.1');
  let got = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    got += chunk;
  });
  socket.on('error', () => undefined);
  const started = performance.now();
  socket.write(request);
  await waitUntil('the answer is whole', async () => {
    const [head = '', text = ''] = got.split('\r\n\r\n');
    const length = /\r\ncontent-length: (\d+)/i.exec(head)?.[1];
    return length !== undefined && Buffer.byteLength(text) >= Number(length);
  }, 5000, 10);
  socket.destroy();
  return { ...parseAnswer(got), elapsedMs: performance.now() - started };
}

/**
 * Asserts that `answer`, from `route` (`METHOD /path/{param}` as the document names it),
 * has `status` and is what the document says of that status: its JSON body valid
 * against the schema, each header it declares, when sent, valid against that header's
 * schema (as text, or as a number for an integer).
 * @returns the headers the document declares for that answer, lower-cased
 */
function conforms(route: string, answer: HttpAnswer, status: number): string[] {
  assert.equal(answer.status, status, `${route}: ${answer.text}`);
  checked.add(route);
  const [method = '', path = ''] = route.split(' ');
  const responses = doc.paths[path]?.[method.toLowerCase()]?.responses;
  assert.ok(responses !== undefined, `${route} is documented`);
  const documented = responses[String(status)] ?? responses[`${String(status)[0]}XX`];
  assert.ok(documented !== undefined, `${route} documents ${status}: ${Object.keys(responses).join(', ')}`);
  const schema = documented.content?.['application/json']?.schema;
  if (schema !== undefined) {
    // Beside the document's components, where its `#/components/schemas/…` refer.
    const validate = ajv.compile({ ...schema, components: doc.components });
    assert.ok(validate(answer.body), `${route} ${status}: ${answer.text}\n${JSON.stringify(validate.errors)}`);
  }
  for (const [name, { schema: headerSchema }] of Object.entries(documented.headers ?? {})) {
    const value = answer.headers.get(name);
    if (value === null) continue;
    const typed = (headerSchema as { type?: string }).type === 'integer' && /^\d+$/.test(value) ? Number(value) : value;
    const validate = ajv.compile(headerSchema);
    assert.ok(validate(typed), `${route} ${status} ${name}: ${value}\n${JSON.stringify(validate.errors)}`);
  }
  return Object.keys(documented.headers ?? {}).map((h) => h.toLowerCase());
}

test('the success answers of every documented route, and its usual refusals, are what the document says', async () => {
  const user = 'oas-ann';
  const created = await api.post('/v1/messages', { to: user, type: 't', data: { a: 1 }, from: 'sys', client_msg_id: 'oas-1' });
  conforms('POST /v1/messages', created, 201);
  const id = (created.body as { id: string }).id;
  conforms('POST /v1/messages', await api.post('/v1/messages', { to: user, type: 't', data: { a: 1 }, from: 'sys', client_msg_id: 'oas-1' }), 200);
  conforms('PUT /v1/rooms/{room}/members', await api.request('PUT', '/v1/rooms/oas-room/members', { body: { users: [user, 'oas-bob'] } }), 200);
  const roomMessage = await api.post('/v1/messages', { room: 'oas-room', type: 't', data: 2 });
  conforms('POST /v1/messages', roomMessage, 201);
  conforms('POST /v1/messages', await api.post('/v1/messages', { to: user, room: 'oas-room', type: 't', data: 1 }), 400);
  conforms('POST /v1/messages/batch', await api.post('/v1/messages/batch', {
    messages: [{ to: user, type: 't', data: 3 }, { room: 'oas-room', type: 't', data: 4 }, { to: 'a b', type: 't', data: 5 }, { type: 't', data: 6 }],
  }), 200);
  conforms('GET /v1/messages/{id}', await api.get(`/v1/messages/${id}`), 200);
  conforms('GET /v1/messages/{id}', await api.get(`/v1/messages/${(roomMessage.body as { id: string }).id}`), 200);
  conforms('GET /v1/messages/{id}', await api.get('/v1/messages/0701ffffffffffff'), 404);
  conforms('GET /v1/messages/{id}', await api.get('/v1/messages/0705000000000001'), 400);
  conforms('GET /v1/users/{uid}/messages', await api.get(`/v1/users/${user}/messages`), 200);
  conforms('GET /v1/users/{uid}/messages', await api.get('/v1/users/oas-nobody/messages'), 200);
  conforms('GET /v1/users/{uid}/presence', await api.get(`/v1/users/${user}/presence`), 200);
  conforms('POST /v1/presence/query', await api.post('/v1/presence/query', { users: [user, 'oas-x'] }), 200);
  conforms('DELETE /v1/users/{uid}/connections', await api.request('DELETE', `/v1/users/${user}/connections`), 200);
  conforms('GET /v1/rooms/{room}/members', await api.get('/v1/rooms/oas-room/members?limit=1'), 200);
  conforms('DELETE /v1/rooms/{room}/members', await api.request('DELETE', '/v1/rooms/oas-room/members', { body: { users: ['oas-bob'] } }), 200);
  conforms('POST /v1/broadcast', await api.post('/v1/broadcast', { type: 't', data: 1 }), 201);
  conforms('POST /v1/channels/{channel}/publish', await api.post('/v1/channels/oas.news/publish', { type: 't', data: 1 }), 201);
  const me = new PixiuClient(server.service.url, await testToken({ kind: 'secret', secret: JWT_SECRET }, user));
  conforms('GET /v1/me/messages', await me.get('/v1/me/messages'), 200);
  conforms('POST /v1/me/ack', await me.post('/v1/me/ack', { device: 'phone', seq: 1 }), 200);
  conforms('GET /healthz', await api.get('/healthz'), 200);
  conforms('GET /readyz', await api.get('/readyz'), 200);
  conforms('GET /metrics', await api.get('/metrics'), 200);
  const routes = Object.entries(doc.paths).flatMap(([path, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`));
  assert.deepEqual(routes.filter((r) => !checked.has(r)), [], 'every documented route was checked');
});

test('the 404s, the ack\'s 409 and the 413s a client acts on are answered under a status the document declares for that route, not only under 4XX', async () => {
  /** {@link conforms}, and the document declares `status` itself for `route`. */
  const declared = (route: string, answer: HttpAnswer, status: number): void => {
    conforms(route, answer, status);
    const [method = '', path = ''] = route.split(' ');
    const response = doc.paths[path]?.[method.toLowerCase()]?.responses[String(status)];
    assert.match(response?.description ?? '', /^(NOT_FOUND|CONFLICT|PAYLOAD_TOO_LARGE): /, `${route} declares ${status}`);
  };
  declared('GET /v1/messages/{id}', await api.get('/v1/messages/0701fffffffffffe'), 404);
  declared('POST /v1/messages', await api.post('/v1/messages', { room: 'oas-no-room', type: 't', data: 1 }), 404);
  declared('GET /v1/rooms/{room}/members', await api.get('/v1/rooms/oas-no-room/members'), 404);
  declared('DELETE /v1/rooms/{room}/members', await api.request('DELETE', '/v1/rooms/oas-no-room/members', { body: { users: ['x'] } }), 404);
  const user = 'oas-acker';
  assert.equal((await api.post('/v1/messages', { to: user, type: 't', data: 1 })).status, 201);
  const me = new PixiuClient(server.service.url, await testToken({ kind: 'secret', secret: JWT_SECRET }, user));
  declared('POST /v1/me/ack', await me.post('/v1/me/ack', { device: 'phone', seq: 1, epoch: 'not-the-epoch' }), 409);
  declared('POST /v1/me/ack', await me.post('/v1/me/ack', { device: 'phone', seq: 1, epoch: 'x'.repeat(4096) }), 413);
  const big = 'x'.repeat(70 * 1024);
  declared('POST /v1/messages', await api.post('/v1/messages', { to: user, type: 't', data: big }), 413);
  declared('POST /v1/broadcast', await api.post('/v1/broadcast', { type: 't', data: big }), 413);
  declared('POST /v1/channels/{channel}/publish', await api.post('/v1/channels/oas.big/publish', { type: 't', data: big }), 413);
  const overBodyLimit = 'x'.repeat(1024 * 1024);
  declared('POST /v1/messages/batch', await api.post('/v1/messages/batch', { messages: [{ to: user, type: 't', data: overBodyLimit }] }), 413);
  declared('POST /v1/presence/query', await api.post('/v1/presence/query', { users: [overBodyLimit] }), 413);
  declared('PUT /v1/rooms/{room}/members', await api.request('PUT', '/v1/rooms/oas-big/members', { body: { users: [overBodyLimit] } }), 413);
  declared('DELETE /v1/rooms/{room}/members', await api.request('DELETE', '/v1/rooms/oas-big/members', { body: { users: [overBodyLimit] } }), 413);
});

test('history gaps carry a reason the document declares, with its enum: trimmed (deleted by hand) and expired answers conform on both routes', async () => {
  const items = dereferenced(doc).paths['/v1/users/{uid}/messages']?.get?.responses['200']?.content?.['application/json']?.schema as
    { properties: { gaps: { items: { properties: { reason: { enum: string[] } }; required: string[] } } } };
  assert.deepEqual(items.properties.gaps.items.properties.reason.enum, ['trimmed', 'expired', 'undeliverable']);
  assert.ok(items.properties.gaps.items.required.includes('reason'));
  const user = 'oas-gaps';
  for (const ttl of [undefined, undefined, 1, undefined]) {
    assert.equal((await api.post('/v1/messages', { to: user, type: 't', data: 1, ...(ttl === undefined ? {} : { ttl }) })).status, 201);
  }
  const { redis: raw } = await openInbox(files, redis.url);
  assert.equal(await raw.xdel(`px:{${user}}:inbox`, '2-0'), 1);
  const me = new PixiuClient(server.service.url, await testToken({ kind: 'secret', secret: JWT_SECRET }, user));
  await waitUntil('seq 3 expires', async () => ((await api.get(`/v1/users/${user}/messages`)).body as { gaps: unknown[] }).gaps.length === 2, 10_000, 100);
  for (const answer of [await api.get(`/v1/users/${user}/messages`), await me.get('/v1/me/messages')]) {
    assert.deepEqual((answer.body as { gaps: unknown }).gaps, [{ from: 2, to: 2, reason: 'trimmed' }, { from: 3, to: 3, reason: 'expired' }]);
  }
  conforms('GET /v1/users/{uid}/messages', await api.get(`/v1/users/${user}/messages`), 200);
  conforms('GET /v1/me/messages', await me.get('/v1/me/messages'), 200);
});

test('the operations routes\' refusals are declared: a body on /healthz, a fragment on /readyz, headers over the limit on /metrics', async () => {
  conforms('GET /healthz', await rawAnswer('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}'), 400);
  const fragment = await rawAnswer('GET /readyz#x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  conforms('GET /readyz', fragment, 400);
  const tooLarge = await rawAnswer(`GET /metrics?x=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  assert.equal((tooLarge.body as { error?: { code?: string } }).error?.code, 'HEADERS_TOO_LARGE');
  conforms('GET /metrics', tooLarge, 431);
});

test('a record of GET /v1/messages/{id} has every field the document requires, kind among them', async () => {
  const created = await api.post('/v1/messages', { to: 'oas-kim', type: 't', data: null });
  const record = await api.get(`/v1/messages/${(created.body as { id: string }).id}`);
  conforms('GET /v1/messages/{id}', record, 200);
  assert.equal((record.body as { kind?: string }).kind, 'user');
});

test('every 401 carries the WWW-Authenticate the document declares for it, on producer and client routes', async () => {
  const refused: Array<[string, Promise<HttpAnswer>, string]> = [
    ['POST /v1/messages', api.post('/v1/messages', { to: 'x', type: 't', data: 1 }, { headers: { authorization: '' } }), 'Bearer'],
    ['GET /v1/messages/{id}', api.get('/v1/messages/0701000000000001', { headers: { authorization: 'Bearer wrong' } }), 'Bearer error="invalid_token"'],
    ['GET /v1/rooms/{room}/members', api.get('/v1/rooms/r/members', { headers: { authorization: '' } }), 'Bearer'],
    ['GET /v1/me/messages', api.get('/v1/me/messages', { headers: { authorization: 'Bearer not-a-jwt' } }), 'Bearer error="invalid_token"'],
  ];
  for (const [route, answer, challenge] of refused) {
    const got = await answer;
    assert.deepEqual(conforms(route, got, 401), ['www-authenticate'], `${route} declares it`);
    assert.equal(got.headers.get('www-authenticate'), challenge, route);
  }
});

test('a history 429 (one user\'s share of the history budget held) is declared on both history routes, with the Retry-After it carries', async () => {
  const user = 'oas-reader';
  const giveBack = holdHistoryBudget(server.service.app.historyBudget, HISTORY_BYTES_PER_USER - 1024 * 1024, user);
  try {
    const me = new PixiuClient(server.service.url, await testToken({ kind: 'secret', secret: JWT_SECRET }, user));
    const refused: Array<[string, HttpAnswer]> = [
      ['GET /v1/users/{uid}/messages', await api.get(`/v1/users/${user}/messages?limit=1000`)],
      ['GET /v1/me/messages', await me.get('/v1/me/messages?limit=1000')],
    ];
    for (const [route, got] of refused) {
      const [method = '', path = ''] = route.split(' ');
      assert.ok(doc.paths[path]?.[method.toLowerCase()]?.responses['429'], `${route} declares its 429`);
      assert.deepEqual(conforms(route, got, 429), ['retry-after'], `${route} declares it`);
      assert.equal(got.headers.get('retry-after'), '1', route);
    }
  } finally {
    giveBack();
  }
});

test('the /v1/me routes\' 429s state the limit\'s numbers, as the refusal\'s message and docs/api.md do; the page\'s adds the history budget\'s words as the history routes give them', async () => {
  const words = '(a burst of 200, then 20 a second, per user on each node)';
  const ack = doc.paths['/v1/me/ack']?.post?.responses['429']?.description ?? '';
  const page = doc.paths['/v1/me/messages']?.get?.responses['429']?.description ?? '';
  for (const description of [ack, page]) assert.ok(description.startsWith('RATE_LIMITED: ') && description.includes(words), description);
  const history = doc.paths['/v1/users/{uid}/messages']?.get?.responses['429']?.description ?? '';
  assert.ok(history.startsWith('RATE_LIMITED: this user\'s history requests in flight on this node, each holding what its page could come to'), history);
  assert.ok(page.endsWith(`. Or ${history.slice('RATE_LIMITED: '.length)}`), page);
  // The error table's 429 row and "Client routes" give the same numbers.
  const apiMd = await readFile(path.join(REPO_ROOT, 'docs/api.md'), 'utf8');
  const row = apiMd.split('\n').find((l) => l.startsWith('| 429 | `RATE_LIMITED` |')) ?? '';
  assert.match(row, /the `\/v1\/me` routes on a node \(a burst of 200, then 20 a second, both routes together;/);
  assert.match(apiMd.replace(/\s+/g, ' '), /These routes are held to a request rate per user on each node: a burst of 200 requests, then 20 a second/);
});

/**
 * The last answer on a new connection after `requests` were written in one write, read until
 * the server closes it: a raw exchange of pipelined requests past the bound.
 */
async function lastPipelinedAnswer(requests: string[]): Promise<HttpAnswer> {
  const { text } = await rawRequest(server.service.url, requests.join(''));
  return { ...parseAnswer(lastAnswer(text)), elapsedMs: 0 };
}

test('the pipelining bound\'s 429 is declared on every route, with its Retry-After required: a producer\'s pipelined POSTs past it conform', async () => {
  const post = (path: string, body: object): string => {
    const json = JSON.stringify(body);
    return `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${api.token}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`;
  };
  const past = PIPELINE_BOUNDS.maxRequests + 1;
  const sent: Array<[string, string[]]> = [
    ['POST /v1/messages', Array.from({ length: past }, (_, i) => post('/v1/messages', { to: 'oas-piped', type: 't', data: i }))],
    ['POST /v1/messages/batch', Array.from({ length: past }, (_, i) => post('/v1/messages/batch', { messages: [{ to: 'oas-piped', type: 't', data: i }] }))],
  ];
  for (const [route, requests] of sent) {
    const refused = await lastPipelinedAnswer(requests);
    assert.equal((refused.body as { error?: { code?: string } }).error?.code, 'RATE_LIMITED', route);
    assert.deepEqual(conforms(route, refused, 429), ['retry-after'], `${route} declares it`);
    assert.equal(refused.headers.get('retry-after'), '0', route);
  }
  // Any route can answer it (the bound is the server's, before routing): each declares it,
  // with Retry-After required, but the WebSocket handshake's, whose connection limit's 429 has none.
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, { responses }] of Object.entries(methods)) {
      const route = `${method.toUpperCase()} ${path}`;
      const declared = responses['429'] as (DocResponse & { headers?: Record<string, { required?: boolean }> }) | undefined;
      assert.ok(declared?.description?.includes('pipelined behind 64 requests in progress on its connection'), route);
      assert.equal(declared?.headers?.['Retry-After']?.required, route === 'GET /v1/connect' ? undefined : true, route);
    }
  }
});

test('the classes 4XX and 5XX declare no header as always sent: the 401s and 503s that always carry one are declared apart (the 429s: the pipelining bound\'s test)', () => {
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, { responses }] of Object.entries(methods)) {
      const route = `${method.toUpperCase()} ${path}`;
      for (const [status, response] of Object.entries(responses) as Array<[string, { headers?: Record<string, { required?: boolean }> }]>) {
        const always = Object.entries(response.headers ?? {}).filter(([, h]) => h.required === true).map(([name]) => name);
        if (status === '4XX' || status === '5XX') assert.deepEqual(always, [], `${route} ${status}`);
      }
      if (route === 'GET /v1/connect') continue;
      // Every route's 429 (the pipelining bound's) and its Retry-After, the handshake's
      // exception included, are asserted once, by the pipelining bound's test above.
      for (const [status, header] of [['401', 'WWW-Authenticate'], ['503', 'Retry-After']] as const) {
        // The operations routes take no credential.
        if (status === '401' && !path.startsWith('/v1/')) continue;
        const declared = responses[status] as { headers?: Record<string, { required?: boolean }> } | undefined;
        assert.equal(declared?.headers?.[header]?.required, true, `${route} ${status} ${header}`);
      }
    }
  }
});

test('with Redis not answering, every 503 carries the Retry-After the document declares for it, and so does a batch whose items are 503', { timeout: 60_000 }, async () => {
  redis.pause();
  try {
    const unavailable: Array<[string, Promise<HttpAnswer>]> = [
      ['POST /v1/messages', api.post('/v1/messages', { to: 'oas-ivy', type: 't', data: 1 })],
      ['GET /v1/users/{uid}/messages', api.get('/v1/users/oas-ivy/messages')],
      ['GET /readyz', api.get('/readyz')],
    ];
    for (const [route, answer] of unavailable) {
      const got = await answer;
      assert.deepEqual(conforms(route, got, 503), ['retry-after'], `${route} declares it`);
      assert.equal(got.headers.get('retry-after'), '1', route);
    }
    const batch = await api.post('/v1/messages/batch', { messages: [{ to: 'oas-ivy', type: 't', data: 1 }] });
    assert.deepEqual(conforms('POST /v1/messages/batch', batch, 200), ['retry-after']);
    assert.deepEqual((batch.body as { results: Array<{ status: number }> }).results.map((r) => r.status), [503]);
    assert.equal(batch.headers.get('retry-after'), '1');
  } finally {
    redis.resume();
  }
});
