/**
 * The served OpenAPI document's shared components (src/api/shared-schemas.ts): the
 * shapes repeated across routes (the error body, the message id, …) written once in
 * `components.schemas` and referred to by `$ref`, so a client generator makes one type
 * of each, not one per route and status (walk12 F2: `SendMessage400Response`,
 * `SendMessage401Response`, … for one error body). Every reference resolves, every
 * schema compiles as JSON Schema 2020-12 (OpenAPI 3.1), and the routes' own schemas,
 * which validate and serialise, are untouched. The real service on a real port.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { ERRORS } from '../../src/errors.js';
import { errorBody, msgId } from '../../src/api/schemas.js';
import { historyPage } from '../../src/api/routes/history.js';
import { ingestResult } from '../../src/api/routes/message-schemas.js';
import { SHARED_SCHEMAS } from '../../src/api/shared-schemas.js';
import { MSG_ID_PATTERN } from '../../src/ids/msg-id.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { startWithOwnRedis } from './api-fixture.js';
import { dereferenced, refsIn, resolveRef } from './openapi-refs.js';

/** The parts of the document these tests read. */
interface Response {
  description?: string;
  content?: Record<string, { schema?: object }>;
}
/** A Parameter Object, its schema maybe a `$ref`. */
interface Parameter {
  name: string;
  schema?: unknown;
  description?: string;
}
interface Document {
  paths: Record<string, Record<string, { responses?: Record<string, Response>; parameters?: Parameter[] }>>;
  components: { schemas: Record<string, object> };
}

const ERROR_BODY_REF = '#/components/schemas/ErrorBody';

const files = cleanupList();
/** The document as served, its `$ref`s in place. */
let doc: Document;
let docText: string;

before(async () => {
  const { client } = await startWithOwnRedis(files);
  const answer = await client.get('/v1/openapi.json', { headers: { authorization: '' } });
  assert.equal(answer.status, 200, answer.text);
  doc = answer.body as Document;
  docText = answer.text;
});

after(() => files.run());

/** Every response of the document, as `METHOD /path status`. */
function responses(): Array<[string, string, Response]> {
  return Object.entries(doc.paths).flatMap(([p, methods]) => Object.entries(methods).flatMap(([m, op]) =>
    Object.entries(op.responses ?? {}).map(([status, r]): [string, string, Response] => [`${m.toUpperCase()} ${p}`, status, r])));
}

test('every $ref names a schema of components.schemas, which exists; every component is referred to; component names are those OpenAPI allows', () => {
  const refs = refsIn(doc);
  assert.ok(refs.length > 100, `${refs.length} references`);
  for (const ref of refs) {
    assert.match(ref, /^#\/components\/schemas\/[A-Za-z0-9._-]+$/);
    assert.ok(resolveRef(doc, ref) !== undefined, ref);
  }
  // OpenAPI 3.1 §4.8.7.1: a component's key matches ^[a-zA-Z0-9.\-_]+$.
  const names = Object.keys(doc.components.schemas);
  assert.deepEqual(names, SHARED_SCHEMAS.map(([name]) => name));
  for (const name of names) assert.ok(refs.includes(`#/components/schemas/${name}`), `${name} is referred to`);
  assert.doesNotThrow(() => dereferenced(doc));
});

test('every schema of the document, the components and each operation\'s, compiles as JSON Schema 2020-12 with its references resolved', () => {
  const ajv = new Ajv2020({ strict: false });
  let compiled = 0;
  const compile = (schema: object): void => {
    ajv.compile({ ...schema, components: doc.components });
    compiled++;
  };
  for (const schema of Object.values(doc.components.schemas)) compile(schema);
  JSON.stringify(doc.paths, (key, value: unknown) => {
    if (key === 'schema' && value !== null && typeof value === 'object') compile(value);
    return value;
  });
  assert.ok(compiled > 150, `${compiled} schemas`);
});

test('the error body is written once, as ErrorBody, and every error answer of every route refers to it: no inline copy, the code\'s enum in one place', () => {
  let errors = 0;
  for (const [route, status, response] of responses()) {
    if (/^2/.test(status)) continue;
    assert.deepEqual(response.content?.['application/json']?.schema, { $ref: ERROR_BODY_REF }, `${route} ${status}`);
    // The status's own words stay on the response, not in the shared schema.
    assert.ok((response.description ?? '').length > 0, `${route} ${status} is described`);
    errors++;
  }
  assert.ok(errors > 80, `${errors} error answers`);
  const { ErrorBody, ErrorDetail, ErrorCode } = doc.components.schemas;
  assert.deepEqual(ErrorBody, { ...errorBody, properties: { error: { $ref: '#/components/schemas/ErrorDetail' } } });
  assert.deepEqual((ErrorDetail as { properties: object }).properties, { ...errorBody.properties.error.properties, code: { $ref: '#/components/schemas/ErrorCode' } });
  assert.deepEqual(ErrorCode, errorBody.properties.error.properties.code);
  assert.deepEqual(dereferenced(doc).components.schemas.ErrorBody, errorBody);
  // The catalogue's list of codes appears once in the whole document.
  const codes = JSON.stringify(Object.keys(ERRORS));
  assert.equal(docText.split(codes).length - 1, 1, 'the code enum once');
  // A batch item that failed alone holds the same error object.
  const batchItems = JSON.stringify(doc.paths['/v1/messages/batch']?.post?.responses?.['200']);
  assert.ok(batchItems.includes('"error":{"$ref":"#/components/schemas/ErrorDetail"}'), batchItems);
});

test('the message id, the user id, a message\'s two forms, a recipient and the history page are shared too; a schema like one of them but not the same stays inline', () => {
  const referred = (name: string): number => refsIn(doc).filter((r) => r === `#/components/schemas/${name}`).length;
  assert.ok(referred('MessageId') >= 8, `MessageId: ${referred('MessageId')}`);
  assert.equal((doc.components.schemas.MessageId as { pattern?: string }).pattern, MSG_ID_PATTERN, 'published with its whole rule');
  for (const name of ['UserId', 'MessageToUsers', 'MessageToRoom', 'Recipient', 'HistoryPage']) assert.ok(referred(name) >= 2, `${name}: ${referred(name)}`);
  for (const route of ['/v1/users/{uid}/messages', '/v1/me/messages']) {
    assert.deepEqual(doc.paths[route]?.get?.responses?.['200']?.content?.['application/json']?.schema, { $ref: '#/components/schemas/HistoryPage' }, route);
  }
  // GET /v1/messages/{id}'s parameter has the MsgID's pattern with words of its own: not the shared one.
  const param = JSON.stringify(doc.paths['/v1/messages/{id}']?.get);
  assert.ok(!param.includes('"schema":{"$ref":"#/components/schemas/MessageId"}'), 'the id parameter is its own schema');
  assert.ok(param.includes(JSON.stringify(MSG_ID_PATTERN)), 'with the whole rule inline');
  // A recipient's and a page's user, and the {uid} parameters (their words moved to the
  // Parameter Object), are the UserId (walk16 F1.1); a {room}, "a room id", is not.
  const userRef = { $ref: '#/components/schemas/UserId' };
  const { Recipient, HistoryPage } = doc.components.schemas as Record<string, { properties: Record<string, unknown> }>;
  assert.deepEqual(Recipient?.properties.user, userRef);
  assert.deepEqual(HistoryPage?.properties.user, userRef);
  for (const [route, method] of [['/v1/users/{uid}/messages', 'get'], ['/v1/users/{uid}/presence', 'get'], ['/v1/users/{uid}/connections', 'delete']] as const) {
    const uid = doc.paths[route]?.[method]?.parameters?.find((p) => p.name === 'uid');
    assert.deepEqual(uid?.schema, userRef, route);
    assert.equal(uid?.description, (doc.components.schemas.UserId as { description: string }).description, `${route}: its words kept`);
  }
  const room = doc.paths['/v1/rooms/{room}/members']?.get?.parameters?.find((p) => p.name === 'room');
  assert.ok(room !== undefined && !JSON.stringify(room.schema).includes('$ref'), 'a room id stays inline');
});

test('the document is under half its size with every shape inline', () => {
  const bytes = Buffer.byteLength(docText);
  // Measured on the document served now, every $ref replaced by what it refers to, not on
  // the 148,314 bytes served before the components (walk12 F2): the routes' answers have
  // grown since (walk26: the 429 on every route, the batch items' statuses), and a fixed
  // figure came to measure that growth rather than what the components save.
  const inline = Buffer.byteLength(JSON.stringify({ ...dereferenced(doc), components: {} }));
  assert.ok(bytes < inline / 2, `${bytes} bytes, ${inline} inline`);
});

test('the routes\' own schemas, which validate and serialise, keep their shapes inline: only the document refers', () => {
  assert.equal(errorBody.properties.error.properties.code.enum.length, Object.keys(ERRORS).length);
  assert.equal(historyPage.properties.messages.items.properties.id, msgId);
  assert.equal(ingestResult.properties.id, msgId);
  assert.equal(msgId.pattern, '^[0-9a-f]{16}$');
  assert.ok(!JSON.stringify([errorBody, historyPage, ingestResult]).includes('$ref'));
});
