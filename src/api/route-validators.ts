/**
 * The Ajv validators of the HTTP API's routes and batch items (validation.ts has the
 * rest of input handling: body parsing, framing, error words). Bodies are validated
 * strictly: no type coercion (a number is not a user id) and no removal of unknown
 * fields (a typo in a field name must be an error, not silently dropped). Query
 * strings and path parameters arrive as text, so there numbers are coerced and
 * defaults applied. Each validator is compiled once per process, on first use
 * (schema-cache.ts).
 */
import { Ajv, type ValidateFunction } from 'ajv';
import type { FastifySchema, FastifySchemaCompiler, FastifyServerOptions } from 'fastify';
import { cachedValidator, lazyValidator, type Validate } from './schema-cache.js';
import { isPlainInteger } from './plain-integer.js';
import { withNullHints } from './null-hints.js';

// `verbose` gives an error its data and schema: describeErrors names an unknown field
// of an object that also misses a required one (error-words.ts, unknownFieldOf).
// Built only when validation fails. `validateSchema: false`: the schemas are ours and
// fixed, and every one a route or a batch item uses is checked against the meta-schema
// by test/api/unknown-fields.test.ts; compiling the meta-schema, once per Ajv, cost
// ~50 ms of CPU each at every start. Each body validator marks a refused null that may
// be left out (null-hints.ts), for its words.
const strict = new Ajv({ allErrors: false, coerceTypes: false, removeAdditional: false, useDefaults: false, strict: false, verbose: true, validateSchema: false });
const lenient = new Ajv({ allErrors: false, coerceTypes: true, removeAdditional: false, useDefaults: true, strict: false, validateSchema: false });

/**
 * A validator of `schema` with the strict (body) rules, for validating batch items one
 * by one; compiled on its first call (schema-cache.ts {@link lazyValidator}), not when a
 * route module is loaded.
 */
export function bodySchemaValidator(schema: object): Validate {
  return lazyValidator(() => withNullHints(strict.compile(schema), schema));
}

/** What fastify takes as `schemaController.compilersFactory.buildValidator`. */
type ValidatorFactory = NonNullable<NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>['buildValidator']>;

/**
 * The routes' validators, for fastify's `schemaController.compilersFactory.buildValidator`
 * (app.ts): bodies strictly, query strings and path parameters with coercion and
 * defaults (the module comment), each compiled once per process on first use
 * (schema-cache.ts), not once per app. Given to fastify as its factory rather than by
 * `app.setValidatorCompiler`, it keeps fastify from loading its default compiler
 * (@fastify/ajv-compiler, with Ajv's JTD build: ~30 ms of CPU a start, unused).
 * (fastify's type for the factory names Ajv's own function type; what fastify calls is
 * any validator function with Ajv's `errors`, lib/validation.js `validateParam`, which
 * cachedValidator's are, compiled or not yet: hence the cast.)
 */
export const routeValidators = ((): FastifySchemaCompiler<FastifySchema> => ({ schema, httpPart }) => (httpPart === 'body'
  ? cachedValidator('body', schema, () => withNullHints(strict.compile(schema as object), schema))
  : cachedValidator('text', schema, () => withPlainParameters(lenient.compile(schema as object), schema)))) as unknown as ValidatorFactory;

/** `from 1 to 1000 `, `of at least 0 `, or nothing: the bounds of an integer parameter, for its refusal. */
function integerRange(prop: { minimum?: number; maximum?: number } | undefined): string {
  const { minimum, maximum } = prop ?? {};
  if (minimum !== undefined && maximum !== undefined) return `from ${minimum} to ${maximum} `;
  if (minimum !== undefined) return `of at least ${minimum} `;
  return maximum !== undefined ? `of at most ${maximum} ` : '';
}

/**
 * Wraps a coercing validator so that its integer properties accept only plain decimal
 * digits: Ajv's coercion reads the text with `Number()`, which also takes `1e3`,
 * `0x10`, `" 1"` and `1.0`, and `after_seq=1e3` would then page from 1000. A
 * parameter that is not a list and is given more than once is refused as such.
 */
export function withPlainParameters(validate: ValidateFunction, schema: unknown): ValidateFunction {
  const props = (schema as { properties?: Record<string, { type?: unknown; minimum?: number; maximum?: number }> } | null)?.properties ?? {};
  const integers = Object.keys(props).filter((k) => props[k]?.type === 'integer');
  // A parameter given twice (`?limit=1&limit=2`) arrives as an array: say so, rather
  // than "must be integer" about a value the client never wrote.
  const singles = Object.keys(props).filter((k) => props[k]?.type !== 'array');
  // (Integers are among the singles.)
  if (singles.length === 0) return validate;
  const wrapped = ((data: unknown, ...rest: unknown[]) => {
    if (typeof data === 'object' && data !== null) {
      for (const name of singles) {
        const v = (data as Record<string, unknown>)[name];
        if (Array.isArray(v)) {
          // Keywords of our own: describeErrors says their message as it is.
          wrapped.errors = [{
            instancePath: `/${name}`, schemaPath: `#/properties/${name}`, keyword: 'singleValue',
            params: {}, message: `is given ${v.length} times; give it once`,
          }];
          return false;
        }
      }
      for (const name of integers) {
        const v = (data as Record<string, unknown>)[name];
        if (typeof v === 'string' && !isPlainInteger(v)) {
          wrapped.errors = [{
            instancePath: `/${name}`, schemaPath: `#/properties/${name}/type`, keyword: 'plainInteger',
            params: {}, message: `must be an integer ${integerRange(props[name])}written in decimal digits, without leading zeros`,
          }];
          return false;
        }
      }
    }
    const ok = (validate as (d: unknown, ...r: unknown[]) => boolean)(data, ...rest);
    wrapped.errors = validate.errors;
    return ok;
  }) as ValidateFunction;
  wrapped.schema = validate.schema;
  return wrapped;
}
