/**
 * Which `null` refused in a request body is an optional field that has no value, the
 * one a body's refusal tells to leave out ("not null (an optional field with no value
 * is left out)": docs/api.md, "Integration traps"; what many serializers write for an
 * unset field). An array item (`{"users": [null]}`) or a required field (`{"users":
 * null}`) must not be left out, and their refusal said it must (walk8 F2): they are
 * told only "not null". Marks the error for error-words.ts `wordError`.
 */
import type { ErrorObject } from 'ajv';
import type { Validate } from './schema-cache.js';

/** What a JSON schema holds that this module reads. */
interface SchemaPart {
  readonly required?: readonly string[];
  readonly properties?: Readonly<Record<string, unknown>>;
}

/** The value at JSON-pointer `segments` (already unescaped) in `root`, or undefined. */
function at(root: unknown, segments: readonly string[]): unknown {
  let node = root;
  for (const s of segments) {
    if (typeof node !== 'object' || node === null || !Object.hasOwn(node, s)) return undefined;
    node = (node as Record<string, unknown>)[s];
  }
  return node;
}

/** A JSON pointer's segments (RFC 6901: `~1` is `/`, `~0` is `~`), without its leading `#` or `/`. */
function segmentsOf(pointer: string): string[] {
  const path = pointer.replace(/^#?\//, '');
  return path === '' ? [] : path.split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/**
 * True when `e`, a `type` error on a `null`, is on a field its object may leave out:
 * a property (not an array item, not the body) that the object's schema does not
 * require. Of a message's `to` and `room`, of which one must be given (messages.ts
 * `checkAddressing`), only when the object holds the other.
 * @param schema the schema `e` comes from (its `schemaPath` is a pointer into it)
 * @param data the value validated (its `instancePath` is a pointer into it)
 */
export function isOmittableNull(e: ErrorObject, schema: unknown, data: unknown): boolean {
  const path = segmentsOf(e.schemaPath);
  if (e.keyword !== 'type' || e.data !== null || path.pop() !== 'type' || path.length < 2 || path[path.length - 2] !== 'properties') return false;
  const name = path[path.length - 1] ?? '';
  const object = at(schema, path.slice(0, -2)) as SchemaPart | undefined;
  if (object?.required?.includes(name) === true) return false;
  const known = object?.properties ?? {};
  if ((name === 'to' || name === 'room') && Object.hasOwn(known, 'to') && Object.hasOwn(known, 'room')) {
    const other = at(data, [...segmentsOf(e.instancePath).slice(0, -1), name === 'to' ? 'room' : 'to']);
    return other !== undefined && other !== null;
  }
  return true;
}

/**
 * `validate` (compiled from `schema`, strictly and `verbose`: route-validators.ts)
 * with its first error marked `params.omittable = true` when it refuses a `null` that
 * {@link isOmittableNull} says may be left out. Ajv reports the first error only
 * (`allErrors: false`), which is the one describeErrors words.
 */
export function withNullHints(validate: Validate, schema: unknown): Validate {
  const hinted: Validate = (data, dataCxt) => {
    const ok = validate(data, dataCxt);
    const errors = validate.errors;
    const first = errors?.[0];
    if (!ok && first !== undefined && isOmittableNull(first, schema, data)) {
      first.params = { ...first.params, omittable: true };
    }
    hinted.errors = errors;
    return ok;
  };
  return hinted;
}
