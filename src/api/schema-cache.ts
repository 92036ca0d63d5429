/**
 * Route validators and response serializers compiled once per process, by their
 * schema's JSON, and only when first used. Fastify hands every app instance its routes'
 * schemas as new objects, which Ajv's own cache (by object) never finds, and compiles
 * every response schema again (fast-json-stringify, which also compiles the Ajv checks
 * of an `anyOf` on its first answer): ~0.1 s of CPU per app, and most of it for routes a
 * given process never serves. Compiling on first use moves a route's compile (1–30 ms,
 * once per process) into its first request instead of every start; the test suite, whose
 * time is CPU-bound on a 2-core machine, starts the service some 340 times. Neither holds
 * per-app state: each is a function of its schema and options.
 */
import type { ErrorObject, ValidateFunction } from 'ajv';
import SerializerSelector, { type SerializerFactory, type Serializer } from '@fastify/fast-json-stringify-compiler';

/**
 * A validator in Ajv's shape: true when `data` is valid, else false with `errors` set;
 * `dataCxt` as Ajv takes it (the parent, for coercing a root value).
 */
export type Validate = ((data: unknown, dataCxt?: Parameters<ValidateFunction>[1]) => boolean) & { errors?: ErrorObject[] | null };

/**
 * A validator that calls `compile` on its first call, then validates with what it
 * built (also for the calls after), handing on each call's `errors`.
 * @throws what `compile` throws (Ajv's error for a schema it refuses), at that first call
 */
export function lazyValidator(compile: () => Validate): Validate {
  let compiled: Validate | undefined;
  const validate: Validate = (data, dataCxt) => {
    compiled ??= compile();
    const ok = compiled(data, dataCxt);
    validate.errors = compiled.errors;
    return ok;
  };
  return validate;
}

const compileDefault = SerializerSelector();
const compiled = new Map<string, Serializer>();

/**
 * A `schemaController.compilersFactory.buildSerializer` for fastify: fastify's default
 * serializer compiler, compiling a route's serializer on its first answer and
 * remembering it by (shared schemas, options, route schema) as JSON. The route's
 * method, URL and status do not change what is built.
 */
export const cachedSerializers: SerializerFactory = (externalSchemas, options) => {
  const compile = compileDefault(externalSchemas, options);
  const prefix = `${JSON.stringify(externalSchemas ?? null)} ${JSON.stringify(options ?? null)} `;
  return (route) => {
    const key = prefix + JSON.stringify(route.schema);
    let serialize = compiled.get(key);
    if (serialize === undefined) {
      let built: Serializer | undefined;
      serialize = (data) => (built ??= compile(route))(data);
      compiled.set(key, serialize);
    }
    return serialize;
  };
};

/** Validators of this process, by the part they check and their schema's JSON. */
const validators = new Map<string, Validate>();
/** The schemas of {@link validators}, in the order first met. */
const schemas: Array<{ part: 'body' | 'text'; schema: unknown }> = [];

/**
 * The schema of every validator {@link cachedValidator} made in this process, once each
 * (by part and JSON). For test/unit/route-schemas.test.ts, which checks them against
 * JSON Schema's meta-schema: the Ajv instances that compile them do not.
 */
export function validatorSchemas(): ReadonlyArray<{ part: 'body' | 'text'; schema: unknown }> {
  return schemas;
}

/**
 * The validator of `schema` for a request's `part` (`body`, or `text` for a query or
 * path read as text): one per part and schema JSON in this process, compiled by
 * `compile` on its first call ({@link lazyValidator}).
 */
export function cachedValidator(part: 'body' | 'text', schema: unknown, compile: () => Validate): Validate {
  const key = `${part} ${JSON.stringify(schema)}`;
  let validate = validators.get(key);
  if (validate === undefined) {
    validate = lazyValidator(compile);
    validators.set(key, validate);
    schemas.push({ part, schema });
  }
  return validate;
}
