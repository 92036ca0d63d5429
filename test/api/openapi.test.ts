/**
 * The OpenAPI document (`GET /v1/openapi.json`, docs/api.md) against the real service
 * on a real port: which credential each route takes (none for the operations routes,
 * the user's JWT for `/v1/me/…`), a described success answer with its schema for
 * every route, besides described error answers, a unique operationId for every route
 * (generated clients name their methods by it) and a server that works wherever the
 * service runs; and request bodies as the routes take them, checked with Ajv as a client
 * generator would read them. The document is read with its `$ref`s resolved
 * (openapi-refs.ts); openapi-components.test.ts checks the references themselves.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import fc from 'fast-check';
import { ERRORS } from '../../src/errors.js';
import { isUserId, msgId, userId } from '../../src/api/schemas.js';
import { MSG_ID_PATTERN } from '../../src/ids/msg-id.js';
import { messageBody } from '../../src/api/routes/message-schemas.js';
import { REPO_ROOT, cleanupList, type PixiuClient } from '../harness/pixiu-server.js';
import { startWithOwnRedis } from './api-fixture.js';
import { dereferenced } from './openapi-refs.js';

/** The parts of an OpenAPI 3 document these tests read. */
interface Operation {
  operationId?: string;
  parameters?: Array<{ name: string; in: string; schema?: unknown }>;
  security?: Array<Record<string, string[]>>;
  requestBody?: { content?: Record<string, { schema?: object }> };
  responses?: Record<string, { description?: string; content?: Record<string, { schema?: unknown }> }>;
}
interface Document {
  openapi: string;
  servers?: Array<{ url: string; description?: string }>;
  security?: Array<Record<string, string[]>>;
  paths: Record<string, Record<string, Operation>>;
}

/** fastify-swagger's description of a response given none. */
const PLACEHOLDER = 'Default Response';
/** Routes that need no credential (docs/api.md, "Authentication"). */
const OPEN_ROUTES = ['GET /healthz', 'GET /readyz', 'GET /metrics'];
/** Routes that take the user's JWT. */
const CLIENT_ROUTES = ['GET /v1/me/messages', 'POST /v1/me/ack'];

/** The document with every `$ref` replaced by what it names. */
let doc: Document;
/** The document's JSON text, as served. */
let docText: string;
/** Every documented route as `METHOD /path`, with its operation. */
let operations: Array<[string, Operation]>;
const files = cleanupList();
let client: PixiuClient;

before(async () => {
  ({ client } = await startWithOwnRedis(files));
  const answer = await client.get('/v1/openapi.json', { headers: { authorization: '' } });
  assert.equal(answer.status, 200, answer.text);
  doc = dereferenced(answer.body as Document);
  docText = answer.text;
  operations = Object.entries(doc.paths).flatMap(([p, methods]) =>
    Object.entries(methods).map(([m, op]): [string, Operation] => [`${m.toUpperCase()} ${p}`, op]));
});

after(() => files.run());

/** The operation of `route` (`METHOD /path`); fails when the document lacks it. */
function operation(route: string): Operation {
  const found = operations.find(([r]) => r === route);
  assert.ok(found, `${route} in ${operations.map(([r]) => r).join(', ')}`);
  return found[1];
}

test('/healthz, /readyz and /metrics are marked open (security: []), under the global apiToken', () => {
  assert.deepEqual(doc.security, [{ apiToken: [] }]);
  for (const route of OPEN_ROUTES) assert.deepEqual(operation(route).security, [], route);
});

test('the client routes name the userToken scheme; every other route keeps the global apiToken', () => {
  for (const route of CLIENT_ROUTES) assert.deepEqual(operation(route).security, [{ userToken: [] }], route);
  for (const [route, op] of operations) {
    if (OPEN_ROUTES.includes(route) || CLIENT_ROUTES.includes(route)) continue;
    assert.equal(op.security, undefined, `${route} inherits the API token`);
  }
});

test('every documented route has a described 2xx answer with a schema, and described error answers', () => {
  assert.ok(operations.length >= 17, `${operations.length} routes`);
  for (const [route, op] of operations) {
    const responses = Object.entries(op.responses ?? {});
    const success = responses.filter(([status]) => /^2/.test(status));
    assert.ok(success.length > 0, `${route} has a 2xx answer: ${responses.map(([s]) => s).join(', ')}`);
    for (const [status, response] of responses) {
      assert.ok(response.description !== undefined && response.description !== PLACEHOLDER, `${route} ${status} is described: ${response.description}`);
      const media = Object.entries(response.content ?? {});
      assert.ok(media.length > 0 && media.every(([, m]) => m.schema !== undefined), `${route} ${status} has a schema`);
    }
    // Every route answers errors with the JSON error body, the probes and the scrape too
    // (a body on a GET, a fragment, headers over the limit, a node shutting down: a
    // contract tester found them undeclared there).
    for (const status of ['4XX', '5XX']) assert.ok(op.responses?.[status], `${route} documents ${status}`);
  }
});

test('/readyz documents 200 {status}, the pipelining 429, 503 and the error classes; /metrics answers text/plain, not JSON', () => {
  const ready = operation('GET /readyz').responses ?? {};
  assert.deepEqual(Object.keys(ready).sort(), ['200', '429', '4XX', '503', '5XX']);
  assert.match((ready['503'] as { description?: string }).description ?? '', /^Not ready: UNAVAILABLE/);
  const readySchema = ready['200']?.content?.['application/json']?.schema as { required?: string[] };
  assert.deepEqual(readySchema.required, ['status']);
  const metrics = operation('GET /metrics').responses?.['200'];
  assert.deepEqual(Object.keys(metrics?.content ?? {}), ['text/plain']);
});

test('a message\'s data is documented as any JSON value (no type), in the record and in history', () => {
  const schemaOf = (route: string): { properties: Record<string, unknown> } =>
    operation(route).responses?.['200']?.content?.['application/json']?.schema as { properties: Record<string, unknown> };
  const record = schemaOf('GET /v1/messages/{id}');
  assert.equal((record.properties.data as { type?: unknown }).type, undefined);
  const page = schemaOf('GET /v1/users/{uid}/messages');
  const item = (page.properties.messages as { items: { properties: Record<string, { type?: unknown }> } }).items;
  assert.equal(item.properties.data?.type, undefined);
  // null where the route answers null: OpenAPI 3.1 (JSON Schema) says so in `type`.
  const epoch = page.properties.epoch as { type?: unknown; nullable?: unknown };
  assert.deepEqual([epoch.type, epoch.nullable], [['string', 'null'], undefined]);
});

test('the document is OpenAPI 3.1, whose patterns are read with the u flag: the user-id pattern takes "alice" and refuses a control character', () => {
  assert.equal(doc.openapi, '3.1.0');
  const history = operation('GET /v1/users/{uid}/messages');
  const uid = history.parameters?.find((p) => p.name === 'uid')?.schema as { pattern?: string } | undefined;
  const pattern = new RegExp(uid?.pattern ?? '(?!)', 'u');
  assert.ok(pattern.test('alice') && pattern.test('小明') && !pattern.test('a\u0007b') && !pattern.test('a b'), uid?.pattern);
});

test('every documented route has its own operationId, a camelCase verb phrase', () => {
  const seen = new Map<string, string>();
  for (const [route, op] of operations) {
    const id = op.operationId;
    assert.ok(id !== undefined, `${route} has an operationId`);
    assert.match(id, /^[a-z]+(?:[A-Z][a-z]*)*$/, `${route}: ${id} is camelCase`);
    assert.equal(seen.get(id), undefined, `${route} and ${seen.get(id)} share ${id}`);
    seen.set(id, route);
  }
  assert.equal(operation('POST /v1/messages').operationId, 'sendMessage');
  assert.equal(operation('POST /v1/messages/batch').operationId, 'sendBatch');
  assert.equal(operation('GET /v1/messages/{id}').operationId, 'getMessage');
});

test('the document names a server relative to where it is served, so it works on any host and port', () => {
  assert.deepEqual(doc.servers?.map((s) => s.url), ['/']);
  assert.ok((doc.servers?.[0]?.description ?? '').length > 0, 'the server is described');
});

test('history\'s limit is documented as docs/api.md says: inbox entries read, so an empty page is not the end; the paging rule ends (below latest_seq, or from 0 again)', () => {
  for (const route of ['GET /v1/users/{uid}/messages', 'GET /v1/me/messages']) {
    const limit = operation(route).parameters?.find((p) => p.name === 'limit') as { description?: string; schema?: { description?: string } } | undefined;
    const words = limit?.description ?? limit?.schema?.description ?? '';
    assert.match(words, /^most inbox entries the page reads .*not messages returned/, route);
    assert.match(words, /an empty messages array is not the end;/, route);
    // A rule that ends: "until next_after_seq is latest_seq" never did for an after_seq above it.
    assert.match(words, /from next_after_seq while it is below latest_seq:/, route);
    assert.match(words, /with after_seq above latest_seq, or an epoch other than the pages before, read again from after_seq=0\./, route);
    // The strict integer forms the server holds both parameters to (docs/api.md; walk12 F3).
    const afterSeq = operation(route).parameters?.find((p) => p.name === 'after_seq') as { description?: string; schema?: { description?: string } } | undefined;
    for (const described of [words, afterSeq?.description ?? afterSeq?.schema?.description ?? '']) {
      assert.match(described, /Plain decimal digits, given once: 007, 1e3, \+1 or a second after_seq or limit are refused 400$/, route);
    }
    const page = operation(route).responses?.['200']?.content?.['application/json']?.schema as { properties: Record<string, { description?: string }> };
    const next = page.properties.next_after_seq?.description ?? '';
    assert.match(next, /or after_seq itself when that is above latest_seq/, route);
  }
});

/** Ajv reading the document's schemas as JSON Schema 2020-12 (OpenAPI 3.1), patterns with the u flag. */
const ajv = new Ajv2020({ strict: false, allErrors: true });

/** A validator of `route`'s JSON request body, compiled from the served document. */
function requestValidator(route: string): (body: unknown) => boolean {
  const schema = operation(route).requestBody?.content?.['application/json']?.schema;
  assert.ok(schema !== undefined, `${route} documents a JSON body`);
  const validate = ajv.compile(schema);
  return (body) => validate(body);
}

test('POST /v1/messages documents "exactly one of to and room": the document refuses a body with neither or both, and takes each valid shape', () => {
  const valid = requestValidator('POST /v1/messages');
  assert.equal(valid({ type: 't', data: 1 }), false, 'neither to nor room');
  assert.equal(valid({ to: 'ann', room: 'lobby', type: 't', data: 1 }), false, 'both to and room');
  assert.equal(valid({ to: ['ann', 'bob'], room: 'lobby', type: 't', data: 1 }), false, 'a list and a room');
  assert.equal(valid({ to: 'ann', type: 't', data: 1 }), true, 'to a user');
  assert.equal(valid({ to: ['ann', 'bob'], type: 't', data: { x: 1 }, from: 'sys', client_msg_id: 'k-1', ttl: 60 }), true, 'to users, every field');
  assert.equal(valid({ room: 'lobby', type: 't', data: null }), true, 'to a room');
});

test('POST /v1/messages/batch documents each item as the message POST /v1/messages takes: an item with neither or both of to and room, or an unknown field, is refused by the document', () => {
  const valid = requestValidator('POST /v1/messages/batch');
  const item = { to: 'ann', type: 't', data: 1 };
  assert.equal(valid({ messages: [item, { room: 'lobby', type: 't', data: 2 }] }), true);
  assert.equal(valid({ messages: [item, { type: 't', data: 2 }] }), false, 'an item with neither');
  assert.equal(valid({ messages: [{ ...item, room: 'lobby' }] }), false, 'an item with both');
  assert.equal(valid({ messages: [{ ...item, colour: 'red' }] }), false, 'an item with an unknown field');
  assert.equal(valid({ messages: [{ ...item, type: 'a b' }] }), false, 'an item with a bad type');
  assert.equal(valid({ messages: [] }), false, 'no item');
});

test('a message\'s "exactly one of to and room" is two whole objects, so a generator reads a union {to, …} | {room, …}: no properties beside the oneOf, each branch closed with its own required fields', () => {
  const bodies = [
    operation('POST /v1/messages').requestBody?.content?.['application/json']?.schema,
    (operation('POST /v1/messages/batch').requestBody?.content?.['application/json']?.schema as { properties: { messages: { items: object } } }).properties.messages.items,
  ] as Array<{ properties?: object; required?: string[]; oneOf?: Array<{ type?: string; additionalProperties?: boolean; required?: string[]; properties?: Record<string, unknown> }> }>;
  for (const body of bodies) {
    assert.equal(body.properties, undefined, 'no properties beside the oneOf (openapi-typescript gave them & (unknown | unknown))');
    assert.equal(body.required, undefined);
    const [users, room] = body.oneOf ?? [];
    assert.deepEqual([users?.type, users?.additionalProperties, users?.required], ['object', false, ['to', 'type', 'data']]);
    assert.deepEqual([room?.type, room?.additionalProperties, room?.required], ['object', false, ['room', 'type', 'data']]);
    assert.deepEqual(Object.keys(users?.properties ?? {}), ['to', 'from', 'type', 'data', 'client_msg_id', 'ttl']);
    assert.deepEqual(Object.keys(room?.properties ?? {}), ['room', 'from', 'type', 'data', 'client_msg_id', 'ttl']);
  }
});

test('the document\'s message schema gives 20,000 generated bodies the verdicts its first form gave (properties beside a oneOf of required-only branches), which the server\'s checks give', () => {
  const documented = requestValidator('POST /v1/messages');
  const first = new Ajv2020({ strict: false, allErrors: true }).compile({ ...messageBody, oneOf: [{ required: ['to'] }, { required: ['room'] }] });
  // Each field valid three times in four, else one of the values the rules refuse; to,
  // room, from, client_msg_id and ttl present or not; type or data left out, or an
  // unknown field added, once in ten.
  const field = (valid: unknown[], invalid: unknown[]) => fc.oneof({ arbitrary: fc.constantFrom(...valid), weight: 3 }, { arbitrary: fc.constantFrom(...invalid), weight: 1 });
  const ids = ['a b', '', 'x'.repeat(129), 'a\u2028', '\ud800', 1, null, []];
  const fields = fc.record({
    to: field(['ann', ['ann', 'bob'], 'x'.repeat(128), '\u{1f600}'], [...ids, ['a b'], ['ann', 1]]),
    room: field(['lobby', 'r:1'], ids),
    from: field(['sys'], ids),
    type: field(['t', 'chat.text'], ['a b', '', 1, null]),
    data: fc.oneof(fc.constantFrom(null, 0, 'x', [], {}), fc.jsonValue({ maxDepth: 2 })),
    client_msg_id: field(['k-1', ' '], ['', '\u00e9', 5]),
    ttl: field([1, 2_592_000, 60], [0, 1.5, 2_592_001, '60']),
  }, { requiredKeys: ['type', 'data'] });
  const body = fc.tuple(fields, fc.nat(29)).map(([b, n]) => {
    const { type, data, ...rest } = b;
    if (n === 0) return { ...rest, data };
    if (n === 1) return { ...rest, type };
    return n === 2 ? { ...b, colour: 'red' } : b;
  });
  const differ: unknown[] = [];
  let taken = 0;
  for (const b of fc.sample(fc.oneof({ arbitrary: body, weight: 19 }, { arbitrary: fc.jsonValue({ maxDepth: 1 }), weight: 1 }), { numRuns: 20_000, seed: 3 })) {
    const verdict = documented(b);
    if (verdict !== first(b)) differ.push(b);
    if (verdict) taken++;
  }
  assert.deepEqual(differ.slice(0, 5), [], `${differ.length} differ`);
  assert.ok(taken > 1000 && taken < 19_000, `${taken} taken`);
});

test('a message or batch item with neither or both of to and room is still refused in the route\'s own words, not a schema validator\'s', async () => {
  const refusals = [
    [{ type: 't', data: 1 }, 'body must have to (a user id or a list of them) or room'],
    [{ to: 'ann', room: 'lobby', type: 't', data: 1 }, 'body has both to and room; give one'],
  ] as const;
  for (const [body, message] of refusals) {
    const answer = await client.post('/v1/messages', body);
    assert.equal(answer.status, 400, answer.text);
    assert.deepEqual(answer.body, { error: { code: 'INVALID_REQUEST', message } });
  }
  const batch = await client.post('/v1/messages/batch', { messages: refusals.map(([body]) => body) });
  assert.equal(batch.status, 200, batch.text);
  assert.deepEqual((batch.body as { results: unknown[] }).results, [
    { status: 400, error: { code: 'INVALID_REQUEST', message: 'messages/0 must have to (a user id or a list of them) or room' } },
    { status: 400, error: { code: 'INVALID_REQUEST', message: 'messages/1 has both to and room; give one' } },
  ]);
});

test('GET /v1/messages/{id} documents its id\'s pattern (16 lower-case hex digits, a kind 01–04, a counter not 0, as the route checks) and kind among the record\'s required fields', () => {
  const op = operation('GET /v1/messages/{id}');
  const id = op.parameters?.find((p) => p.name === 'id' && p.in === 'path')?.schema as { pattern?: string } | undefined;
  const pattern = new RegExp(id?.pattern ?? '(?!)', 'u');
  assert.ok(pattern.test('0701000000000001') && !pattern.test('0701000000000001a') && !pattern.test('0701ABCDEF000001') && !pattern.test('070100000000001'), id?.pattern);
  // The whole rule, as the route checks it: a kind 01–04, a counter not 0 (a contract tester found these matched).
  for (const refused of ['ffffffffffffffff', '0005000000000001', '0001000000000000']) assert.ok(!pattern.test(refused), refused);
  const record = op.responses?.['200']?.content?.['application/json']?.schema as { required?: string[] };
  assert.ok(record.required?.includes('kind'), `required: ${record.required?.join(', ')}`);
});

test('the headers the server sends are declared: WWW-Authenticate on every 401, Retry-After on every 503 and on a batch\'s 200', () => {
  const headersOf = (op: Operation, status: string): string[] =>
    Object.keys((op.responses?.[status] as { headers?: Record<string, unknown> } | undefined)?.headers ?? {});
  for (const [route, op] of operations) {
    // A node shutting down answers every route 503, the open ones too.
    assert.deepEqual(headersOf(op, '503'), ['Retry-After'], `${route} 503`);
    if (OPEN_ROUTES.includes(route)) assert.equal(op.responses?.['401'], undefined, `${route} takes no credential`);
    else assert.deepEqual(headersOf(op, '401'), ['WWW-Authenticate'], `${route} 401`);
  }
  assert.deepEqual(headersOf(operation('POST /v1/messages/batch'), '200'), ['Retry-After']);
  // Required where always sent (a generated client types them as never missing); the
  // batch 200's only when an item is 503; no `required` left in a header's schema.
  const headerOf = (op: Operation, status: string, name: string) =>
    (op.responses?.[status] as { headers?: Record<string, { required?: boolean; schema?: { required?: unknown } }> } | undefined)?.headers?.[name];
  let always = 0;
  for (const [route, op] of operations) {
    for (const [status, name] of [['401', 'WWW-Authenticate'], ['429', 'Retry-After'], ['503', 'Retry-After']] as const) {
      const header = headerOf(op, status, name);
      if (op.responses?.[status] === undefined) continue;
      assert.equal(header?.required, true, `${route} ${status} ${name}`);
      assert.equal(header?.schema?.required, undefined, `${route} ${status} ${name} schema`);
      always++;
    }
  }
  assert.ok(always > 30, `${always} headers always sent`);
  const batchRetry = headerOf(operation('POST /v1/messages/batch'), '200', 'Retry-After');
  assert.deepEqual([batchRetry?.required, batchRetry?.schema?.required], [undefined, undefined], 'the batch 200\'s Retry-After is optional');
  // Declared where sent only: never on a success answer but the batch's.
  for (const [route, op] of operations) {
    for (const status of Object.keys(op.responses ?? {}).filter((s) => /^2/.test(s))) {
      if (route !== 'POST /v1/messages/batch') assert.deepEqual(headersOf(op, status), [], `${route} ${status}`);
    }
  }
});

test('the routes that take a client_msg_id declare its 409 CONFLICT, the ack route its epoch\'s, and no other route one', () => {
  const withKey = ['POST /v1/messages', 'POST /v1/broadcast', 'POST /v1/channels/{channel}/publish'];
  for (const [route, op] of operations) {
    const conflict = op.responses?.['409'];
    if (withKey.includes(route)) assert.match(conflict?.description ?? '', /^CONFLICT: the client_msg_id was first used (on this channel )?with other content/, route);
    else if (route === 'POST /v1/me/ack') assert.match(conflict?.description ?? '', /^CONFLICT: epoch is not the inbox's epoch now .* Read GET \/v1\/me\/messages again$/, route);
    else assert.equal(conflict, undefined, route);
  }
  // Each in its route's words (walk29 F11: one text named "the other kind" and "a different message" on all three).
  const said = (route: string): string => operations.find(([r]) => r === route)?.[1].responses?.['409']?.description ?? '';
  assert.match(said('POST /v1/messages'), /, or for a broadcast; nothing appended\. .* a new client_msg_id is for a different message$/);
  assert.match(said('POST /v1/broadcast'), /, or for a message that is no broadcast; nothing published\. .* a new client_msg_id is for a different broadcast$/);
  assert.match(said('POST /v1/channels/{channel}/publish'), /^CONFLICT: the client_msg_id was first used on this channel with other content \(type or data\); nothing published\. .* a new client_msg_id is for a different publication$/);
  assert.doesNotMatch(said('POST /v1/channels/{channel}/publish'), /other kind|message/);
});

test('every route that takes a body declares its 413 PAYLOAD_TOO_LARGE, and the routes that answer a 404 for what they name declare it; no other route does', () => {
  const notFound = ['POST /v1/messages', 'GET /v1/messages/{id}', 'GET /v1/rooms/{room}/members', 'DELETE /v1/rooms/{room}/members'];
  let bodies = 0;
  for (const [route, op] of operations) {
    const tooLarge = op.responses?.['413']?.description;
    if (op.requestBody !== undefined) {
      assert.match(tooLarge ?? '', /^PAYLOAD_TOO_LARGE: the body is over /, route);
      bodies++;
    } else assert.equal(tooLarge, undefined, route);
    if (notFound.includes(route)) assert.match(op.responses?.['404']?.description ?? '', /^NOT_FOUND: /, route);
    else assert.equal(op.responses?.['404'], undefined, route);
  }
  assert.equal(bodies, 8);
  for (const route of ['POST /v1/messages', 'POST /v1/broadcast', 'POST /v1/channels/{channel}/publish']) {
    assert.match(operation(route).responses?.['413']?.description ?? '', /PIXIU_MAX_MESSAGE_BYTES/, route);
  }
});

test('the error body\'s code is an enum of the catalogue\'s codes, the ones docs/api.md\'s Errors table lists, on every error answer, described as a list later releases may add to', async () => {
  const table = (await readFile(path.join(REPO_ROOT, 'docs/api.md'), 'utf8')).split('\n## Errors\n')[1]?.split('\n## ')[0] ?? '';
  const documented = [...table.matchAll(/^\| \d{3} \| `([A-Z_]+)` \|/gm)].map((m) => m[1]).sort();
  assert.deepEqual(documented, Object.keys(ERRORS).sort());
  assert.match(table, /The codes are not a closed list/);
  let answers = 0;
  for (const [route, op] of operations) {
    for (const [status, response] of Object.entries(op.responses ?? {})) {
      if (/^2/.test(status)) continue;
      const schema = response.content?.['application/json']?.schema as { properties?: { error?: { properties?: { code?: { enum?: string[]; description?: string } } } } };
      const code = schema.properties?.error?.properties?.code;
      assert.deepEqual([...(code?.enum ?? [])].sort(), documented, `${route} ${status}`);
      // Not a closed list: a generated client must not fail on a code added later.
      assert.match(code?.description ?? '', /may add codes; a client treats a code it does not know by the answer's HTTP status/, `${route} ${status}`);
      answers++;
    }
  }
  assert.ok(answers > 50, `${answers} error answers`);
});

test('duplicate is fixed by the status where it says a repeat: true under 200, false under 201', () => {
  const duplicateOf = (route: string, status: string): unknown[] => {
    const schema = operation(route).responses?.[status]?.content?.['application/json']?.schema as
      { anyOf?: Array<{ properties: { duplicate: { enum?: unknown[] } } }>; properties?: { duplicate: { enum?: unknown[] } } };
    const branches = schema.anyOf ?? [schema as { properties: { duplicate: { enum?: unknown[] } } }];
    return branches.map((b) => b.properties.duplicate.enum);
  };
  for (const route of ['POST /v1/messages', 'POST /v1/broadcast', 'POST /v1/channels/{channel}/publish']) {
    for (const e of duplicateOf(route, '200')) assert.deepEqual(e, [true], `${route} 200`);
    for (const e of duplicateOf(route, '201')) assert.deepEqual(e, [false], `${route} 201`);
  }
});

test('a batch item\'s status is tied to its duplicate as a single message\'s is: 201 with false, 200 with true (walk26 nit)', () => {
  const items = (operation('POST /v1/messages/batch').responses?.['200']?.content?.['application/json']?.schema as
    { properties: { results: { items: object } } }).properties.results.items;
  const validate = ajv.compile(items);
  const toUsers = { id: '0201000000000001', recipients: [{ user: 'ann', seq: 1 }] };
  const toRoom = { id: '0301000000000001', room: 'club', recipients: 2 };
  for (const done of [toUsers, toRoom]) {
    assert.ok(validate({ status: 201, ...done, duplicate: false }), JSON.stringify(validate.errors));
    assert.ok(validate({ status: 200, ...done, duplicate: true }), JSON.stringify(validate.errors));
    assert.ok(!validate({ status: 201, ...done, duplicate: true }), 'a 201 that says duplicate');
    assert.ok(!validate({ status: 200, ...done, duplicate: false }), 'a 200 that does not');
  }
  assert.ok(validate({ status: 503, error: { code: 'UNAVAILABLE', message: 'm' } }), JSON.stringify(validate.errors));
  // A failed item's status is an error's (walk29 F4).
  for (const status of [201, 200, 399, 600]) assert.ok(!validate({ status, error: { code: 'UNAVAILABLE', message: 'm' } }), `a failed item with ${status}`);
  assert.ok(validate({ status: 409, error: { code: 'CONFLICT', message: 'm' } }), JSON.stringify(validate.errors));
});

test('duplicate\'s description under 201, where it has one, tells the false case, not the repeat of 200', () => {
  for (const route of ['POST /v1/broadcast', 'POST /v1/channels/{channel}/publish']) {
    const schema = operation(route).responses?.['201']?.content?.['application/json']?.schema as { properties: { duplicate: { description?: string } } };
    assert.match(schema.properties.duplicate.description ?? '', /^false: /, route);
  }
});

test('every parameter is described', () => {
  for (const [route, op] of operations) {
    for (const p of op.parameters ?? []) {
      const described = (p as { description?: string }).description ?? (p.schema as { description?: string } | undefined)?.description;
      assert.ok(described !== undefined && described.length > 0, `${route} ${p.in} ${p.name}`);
    }
  }
});

test('the published id patterns spell the refused characters as ranges, no \\s or \\p{…}, and agree with the server\'s rule on a client library\'s samples', () => {
  const patterns = new Set<string>();
  JSON.stringify(doc, (key, value: unknown) => {
    if (key === 'pattern' && typeof value === 'string') patterns.add(value);
    return value;
  });
  for (const p of patterns) assert.ok(!/\\[sSp]/.test(p), `a portable pattern: ${JSON.stringify(p)}`);
  const uid = operation('GET /v1/users/{uid}/messages').parameters?.find((p) => p.name === 'uid')?.schema as { pattern: string };
  const published = new RegExp(uid.pattern, 'u');
  for (const id of ['a\u00a0b', 'a\u3000b', 'a\ufeffb', 'a\u2028b', 'a\tb', 'a\u007fb', 'a\ud800b', 'alice', '\u{1f600}\u{1f601}', 'a\u200bb']) {
    assert.equal(published.test(id), isUserId(id), JSON.stringify(id));
  }
  // The document was rewritten, not the server's schemas (@fastify/swagger copies them).
  assert.equal(userId.pattern, '^[^\\s\\p{Cc}\\p{Cs}]{1,128}$');
});

test('the document is strictly valid JSON (I-JSON, RFC 7493 §2.1) that jq, serde_json and Swift load: no lone surrogate in any string, no raw U+0000, U+2028 or U+2029, every pattern printable ASCII', () => {
  const lone = /\p{Cs}/u;
  const strings: string[] = [];
  JSON.parse(docText, (key, value: unknown) => {
    strings.push(key);
    if (typeof value === 'string') strings.push(value);
    return value;
  });
  assert.deepEqual(strings.filter((s) => lone.test(s)), [], 'strings holding a lone surrogate');
  for (const ch of ['\u0000', '\u2028', '\u2029']) assert.ok(!docText.includes(ch), `U+${ch.codePointAt(0)?.toString(16)} in the JSON text`);
  const patterns = new Set<string>();
  JSON.stringify(doc, (key, value: unknown) => {
    if (key === 'pattern' && typeof value === 'string') patterns.add(value);
    return value;
  });
  for (const p of patterns) assert.match(p, /^[\x20-\x7e]+$/, JSON.stringify(p));
});

test('every MsgID an answer holds is published with its whole rule; the schemas the server serialises answers with keep its shape only', () => {
  const published: string[] = [];
  JSON.stringify(doc, (key, value: unknown) => {
    const pattern = (value as { pattern?: unknown } | null)?.pattern;
    if (key === 'id' && typeof pattern === 'string') published.push(pattern);
    return value;
  });
  assert.ok(published.length >= 8, `${published.length} ids`);
  assert.deepEqual([...new Set(published)], [MSG_ID_PATTERN]);
  // fast-json-stringify tests the pattern on each id of an anyOf answer (a batch's items):
  // the whole rule cost a 1000-item batch answer 33–48 % more serialising time.
  assert.equal(msgId.pattern, '^[0-9a-f]{16}$');
});
