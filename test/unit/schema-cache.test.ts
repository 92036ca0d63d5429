/**
 * Route validators and response serializers compiled once per process, on first use
 * (src/api/schema-cache.ts). A validator: one per part and schema JSON, compiled at its
 * first call, handing on each call's errors. A serializer: a schema equal by JSON to one
 * met before gets the same serializer, whatever object holds it, route or status; a
 * different schema or different options get their own, and each serializes by its own
 * schema, compiled at its first answer.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cachedSerializers, cachedValidator, lazyValidator, type Validate } from '../../src/api/schema-cache.js';

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

test('a validator is one per part and schema JSON, whatever object holds the schema, compiled once at its first call', () => {
  let compiled = 0;
  const compile = (): Validate => { compiled += 1; return () => true; };
  const first = cachedValidator('body', schemaOf('cache-probe'), compile);
  assert.equal(cachedValidator('body', schemaOf('cache-probe'), compile), first);
  assert.equal(compiled, 0, 'nothing compiled before a call');
  assert.equal(first({}), true);
  assert.equal(first({}), true);
  assert.equal(compiled, 1);
  const text = cachedValidator('text', schemaOf('cache-probe'), compile);
  assert.notEqual(text, first, 'a query or path validator is its own');
  const other = cachedValidator('body', schemaOf('cache-probe-2'), compile);
  assert.notEqual(other, first);
  text({});
  other({});
  assert.equal(compiled, 3);
});

test('a lazy validator validates with what it compiled and hands on each call\'s errors', () => {
  const error = { instancePath: '/seq', schemaPath: '#/properties/seq/type', keyword: 'type', params: {}, message: 'must be integer' };
  const compiled: Validate = (data) => {
    const ok = typeof (data as { seq?: unknown }).seq === 'number';
    compiled.errors = ok ? null : [error];
    return ok;
  };
  const validate = lazyValidator(() => compiled);
  assert.equal(validate({ seq: 'x' }), false);
  assert.deepEqual(validate.errors, [error]);
  assert.equal(validate({ seq: 1 }), true);
  assert.equal(validate.errors, null);
});

test('a serializer is compiled at its first answer, not when a route asks for it', () => {
  // A reference fast-json-stringify cannot resolve fails its compile: asking for the
  // serializer does not, its first answer does.
  const serialize = cachedSerializers({}, {})(route({ $ref: '#/definitions/lazyProbeMissing' }));
  assert.throws(() => serialize({}), /lazyProbeMissing/);
});
