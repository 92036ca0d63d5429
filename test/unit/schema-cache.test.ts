/**
 * Route validators and response serializers compiled once per process
 * (src/api/schema-cache.ts). A validator: compiled the first time its part and schema
 * are met, by JSON. A serializer: a
 * schema equal by JSON to one compiled before gets the same serializer, whatever object
 * holds it, route or status; a different schema or different options get their own,
 * and each serializes by its own schema.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cachedSerializers, cachedValidator } from '../../src/api/schema-cache.js';

const schemaOf = (field: string): object => ({ type: 'object', properties: { [field]: { type: 'integer' } } });
const route = (schema: object, url = '/a', httpStatus = '200') => ({ method: 'GET', url, httpStatus, schema });

test('an equal schema in a new object, on another app, route or status, reuses the serializer compiled first', () => {
  const first = cachedSerializers({}, {})(route(schemaOf('seq')));
  const again = cachedSerializers({}, {})(route(schemaOf('seq'), '/b', '201'));
  assert.equal(again, first);
  assert.equal(first({ seq: 7, other: 1 }), '{"seq":7}');
});

test('another schema, or other options, compile their own serializer', () => {
  const seq = cachedSerializers({}, {})(route(schemaOf('seq')));
  const id = cachedSerializers({}, {})(route(schemaOf('id')));
  assert.notEqual(id, seq);
  assert.equal(id({ seq: 7, id: 3 }), '{"id":3}');
  const rounded = cachedSerializers({}, { rounding: 'floor' })(route(schemaOf('seq')));
  assert.notEqual(rounded, seq);
  assert.equal(rounded({ seq: 7.9 }), '{"seq":7}');
});

test('a validator is compiled once per part and schema JSON, whatever object holds the schema', () => {
  let compiled = 0;
  const compile = (): (() => boolean) => { compiled += 1; return () => true; };
  const first = cachedValidator('body', schemaOf('cache-probe'), compile);
  assert.equal(cachedValidator('body', schemaOf('cache-probe'), compile), first);
  assert.equal(compiled, 1);
  assert.notEqual(cachedValidator('text', schemaOf('cache-probe'), compile), first, 'a query or path validator is its own');
  assert.notEqual(cachedValidator('body', schemaOf('cache-probe-2'), compile), first);
  assert.equal(compiled, 3);
});
