/**
 * Route validators and response serializers compiled once per process, by their
 * schema's JSON. Fastify hands every app instance its routes' schemas as new objects,
 * which Ajv's own cache (by object) never finds, and compiles every response schema
 * again (fast-json-stringify, which also compiles the Ajv checks of an `anyOf` on its
 * first answer): ~0.1 s of CPU per app. Production builds one app per process, so this
 * changes nothing there; the test suite builds hundreds in its processes, and its time
 * is CPU-bound on a 2-core machine. Neither holds per-app state: each is a function of
 * its schema and options.
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

/** Validators compiled in this process, by the part they check and their schema's JSON. */
const validators = new Map<string, unknown>();

/**
 * The validator of `schema` for a request's `part` (`body`, or `text` for a query or
 * path read as text), compiled by `compile` the first time this process meets it.
 */
export function cachedValidator<T>(part: 'body' | 'text', schema: unknown, compile: () => T): T {
  const key = `${part} ${JSON.stringify(schema)}`;
  let validate = validators.get(key) as T | undefined;
  if (validate === undefined) {
    validate = compile();
    validators.set(key, validate);
  }
  return validate;
}
