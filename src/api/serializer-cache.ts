/**
 * Response serializers compiled once per process (fast-json-stringify, as fastify's
 * default compiler builds them), by their schema's JSON. Fastify compiles every route's
 * response schemas again for each app instance, and fast-json-stringify compiles the Ajv
 * checks of an `anyOf` on its first answer: ~0.1 s of CPU per app. Production builds one
 * app per process, so this changes nothing there; the test suite builds hundreds in its
 * processes, and its time is CPU-bound on a 2-core machine. A serializer holds no
 * per-app state: it is a function of its schema and the options below.
 */
import SerializerSelector, { type SerializerFactory, type Serializer } from '@fastify/fast-json-stringify-compiler';

const compileDefault = SerializerSelector();
const compiled = new Map<string, Serializer>();

/**
 * A `schemaController.compilersFactory.buildSerializer` for fastify: fastify's default
 * serializer compiler, remembering what it compiled by (shared schemas, options, route
 * schema) as JSON. The route's method, URL and status do not change what is built.
 */
export const cachedSerializers: SerializerFactory = (externalSchemas, options) => {
  const compile = compileDefault(externalSchemas, options);
  const prefix = `${JSON.stringify(externalSchemas ?? null)} ${JSON.stringify(options ?? null)} `;
  return (route) => {
    const key = prefix + JSON.stringify(route.schema);
    let serialize = compiled.get(key);
    if (serialize === undefined) {
      serialize = compile(route);
      compiled.set(key, serialize);
    }
    return serialize;
  };
};
