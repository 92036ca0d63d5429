/**
 * src/api/shared-schemas.ts on small documents: which schemas become a `$ref` (exact
 * copies; a response's copy whose extra description repeats the response's) and which
 * stay inline (alike but for a word), and that the same document comes out each time.
 * No service: openapi-components.test.ts checks the served document.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withSharedSchemas } from '../../src/api/shared-schemas.js';

const id = { type: 'string', pattern: '^[a-z]+$', description: 'an id' } as const;
const pair = { type: 'object', properties: { a: id, b: id }, required: ['a'] } as const;
const SHARED = [['Pair', pair], ['Id', id]] as const;

/** A document of one operation whose 200 answers `schema` described as `words`, with a query parameter `q` of `param`. */
function documentOf(schema: object, words: string, param: object = id) {
  return {
    openapi: '3.1.0',
    paths: {
      '/x': {
        get: {
          parameters: [{ in: 'query', name: 'q', schema: structuredClone(param) }],
          responses: { 200: { description: words, content: { 'application/json': { schema: structuredClone(schema) } } } },
        },
      },
    },
  };
}

test('an exact copy becomes a $ref, and a shape inside a shared one is referred to from its component', () => {
  const doc = withSharedSchemas(documentOf(pair, 'a pair'), SHARED);
  const get = doc.paths['/x'].get;
  assert.deepEqual(get.responses[200].content['application/json'].schema, { $ref: '#/components/schemas/Pair' });
  assert.deepEqual(get.parameters[0]?.schema, { $ref: '#/components/schemas/Id' });
  assert.deepEqual((doc as unknown as { components: unknown }).components, {
    schemas: {
      Pair: { type: 'object', properties: { a: { $ref: '#/components/schemas/Id' }, b: { $ref: '#/components/schemas/Id' } }, required: ['a'] },
      Id: id,
    },
  });
});

test('a response\'s schema that is a shared shape but for a description repeating the response\'s is that shape; other words keep it inline', () => {
  const repeated = withSharedSchemas(documentOf({ ...pair, description: 'a pair' }, 'a pair'), SHARED);
  assert.deepEqual(repeated.paths['/x'].get.responses[200].content['application/json'].schema, { $ref: '#/components/schemas/Pair' });
  assert.equal(repeated.paths['/x'].get.responses[200].description, 'a pair');
  const own = withSharedSchemas(documentOf({ ...pair, description: 'two ids' }, 'a pair'), SHARED);
  const schema = own.paths['/x'].get.responses[200].content['application/json'].schema as { description?: string; properties?: object };
  assert.equal(schema.description, 'two ids');
  assert.deepEqual(schema.properties, { a: { $ref: '#/components/schemas/Id' }, b: { $ref: '#/components/schemas/Id' } }, 'its parts still shared');
});

test('a parameter\'s schema whose description @fastify/swagger moved to the Parameter Object is the shared shape when those words are its own; other words keep it inline', () => {
  const { description, ...bare } = id;
  const moved = documentOf({}, 'nothing', bare);
  (moved.paths['/x'].get.parameters[0] as { description?: string }).description = description;
  const doc = withSharedSchemas(moved, SHARED);
  assert.deepEqual(doc.paths['/x'].get.parameters[0], { in: 'query', name: 'q', schema: { $ref: '#/components/schemas/Id' }, description });
  const other = documentOf({}, 'nothing', bare);
  (other.paths['/x'].get.parameters[0] as { description?: string }).description = 'another id';
  assert.deepEqual(withSharedSchemas(other, SHARED).paths['/x'].get.parameters[0]?.schema, bare);
});

test('a schema alike but for a word, a description or a pattern, stays inline', () => {
  for (const param of [{ ...id, description: 'the query' }, { ...id, pattern: '^[a-z]*$' }, { type: 'string', pattern: '^[a-z]+$' }]) {
    const doc = withSharedSchemas(documentOf({}, 'nothing', param), SHARED);
    assert.deepEqual(doc.paths['/x'].get.parameters[0]?.schema, param);
  }
});

test('the same document comes out every time; two shared shapes alike, or a name already taken, are refused', () => {
  assert.equal(JSON.stringify(withSharedSchemas(documentOf(pair, 'a pair'), SHARED)), JSON.stringify(withSharedSchemas(documentOf(pair, 'a pair'), SHARED)));
  assert.throws(() => withSharedSchemas(documentOf(pair, 'a pair'), [['Id', id], ['Other', { ...id }]]), /Id and Other are the same shape/);
  const taken = { ...documentOf(pair, 'a pair'), components: { schemas: { Id: {} } } };
  assert.throws(() => withSharedSchemas(taken, SHARED), /components.schemas already has Id/);
});
