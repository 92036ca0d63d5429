/**
 * What a schema violation is told, in plain words: `must not be empty`, `must be a
 * string or an array`, `must be at most 128 characters long`, rather than Ajv's own
 * messages (`must NOT have fewer than 1 characters`, `must be string,array`), which
 * read as a validator's, not as an API's (docs/api.md, "Input rules"). A `pattern` is
 * worded by the rule declared with it (pattern-rules.ts), never shown; a string whose
 * lone surrogate is all the pattern refuses is told so, as `data` is (lone-surrogates.ts).
 *
 * Ajv's keywords and their `params` are those of Ajv 8
 * (https://ajv.js.org/api.html#error-parameters).
 */
import type { ErrorObject } from 'ajv';
import { loneSurrogateWords, wholeCharacters } from './lone-surrogates.js';
import { patternFailure } from './pattern-rules.js';
import { messageBody } from './routes/message-schemas.js';

/** A JSON-schema type with its article, as it follows "must be". */
const TYPE_WORDS: Readonly<Record<string, string>> = {
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  boolean: 'true or false',
  object: 'an object',
  array: 'an array',
  null: 'null',
};

/** `a`, `a or b`, `a, b or c` (with `and`: `a, b and c`). */
function either(words: readonly string[], conjunction = 'or'): string {
  return words.length <= 1 ? (words[0] ?? '') : `${words.slice(0, -1).join(', ')} ${conjunction} ${words[words.length - 1] ?? ''}`;
}

/** `1 item`, `2 items`. */
function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

/** The schema types of a `type` error: Ajv gives one name, a list, or the list joined by commas. */
function typeNames(type: unknown): string[] {
  const names = Array.isArray(type) ? type.map(String) : String(type).split(',');
  return names.map((n) => TYPE_WORDS[n] ?? n);
}

/**
 * The words that follow a field's path for one Ajv error: `must not be empty`,
 * `must be an integer`, `has an unknown field "x"`. A keyword not worded here keeps
 * Ajv's message (which is also where checks of our own put theirs), in lower case.
 */
export function wordError(e: ErrorObject): string {
  const p = e.params as Record<string, unknown>;
  const limit = Number(p.limit);
  switch (e.keyword) {
    case 'type':
      // What many serializers write for an unset optional field (a walkthrough tester's
      // finding); told to leave it out only where it may be (null-hints.ts: not an array
      // item or a required field, walk8 F2).
      if (e.data === null) return `must be ${either(typeNames(p.type))}${inSeconds(e)}, not null${p.omittable === true ? ' (an optional field with no value is left out)' : ''}`;
      return `must be ${either(typeNames(p.type))}${inSeconds(e)}`;
    case 'minLength':
      return limit === 1 ? 'must not be empty' : `must be at least ${count(limit, 'character')} long`;
    case 'maxLength':
      return `must be at most ${count(limit, 'character')} long`;
    case 'minItems':
      return limit === 1 ? 'must not be empty' : `must have at least ${count(limit, 'item')}`;
    case 'maxItems':
      return `must have at most ${count(limit, 'item')}`;
    case 'minProperties':
      return limit === 1 ? 'must not be empty' : `must have at least ${count(limit, 'field')}`;
    case 'maxProperties':
      return `must have at most ${count(limit, 'field')}`;
    case 'minimum':
      return `must be at least ${limit}${inSeconds(e, limit)}`;
    case 'maximum':
      return `must be at most ${limit}${inSeconds(e, limit)}`;
    case 'exclusiveMinimum':
      return `must be more than ${limit}`;
    case 'exclusiveMaximum':
      return `must be less than ${limit}`;
    case 'multipleOf':
      return `must be a multiple of ${String(p.multipleOf)}`;
    case 'enum':
      return `must be ${either((p.allowedValues as unknown[] | undefined ?? []).map((v) => JSON.stringify(v)))}`;
    case 'const':
      return `must be ${JSON.stringify(p.allowedValue)}`;
    case 'required':
      return `is missing the required field ${JSON.stringify(String(p.missingProperty))}`;
    case 'additionalProperties':
      return `has an unknown field ${JSON.stringify(String(p.additionalProperty))}${unaddressed(e)}`;
    case 'pattern':
      return loneSurrogateFailure(String(p.pattern), e.data) ?? patternFailure(String(p.pattern));
    case 'uniqueItems':
      return `must not repeat an item (items ${String(p.j)} and ${String(p.i)} are the same)`;
    default:
      return (e.message ?? 'is invalid').replace(/\bNOT\b/g, 'not');
  }
}

/** Each pattern compiled once, as Ajv reads it (the u flag), by its source. */
const compiled = new Map<string, RegExp>();

/**
 * Why `value` fails `pattern` when a lone surrogate is all it refuses: in the words of
 * `data`'s refusal (lone-surrogates.ts, `holds a lone surrogate (\ud800), which strict
 * JSON decoders …`), not the rule's, which for a broadcast tag did not name surrogates.
 * Only when whole characters in their place (U+FFFD) would match: a field of ASCII
 * (a type, a device) keeps its rule, as a whole character would be refused too.
 * Needs the error's `data` (Ajv's `verbose`); undefined otherwise.
 */
function loneSurrogateFailure(pattern: string, value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const words = loneSurrogateWords(value);
  if (words === undefined) return undefined;
  let re = compiled.get(pattern);
  if (re === undefined) {
    re = new RegExp(pattern, 'u');
    compiled.set(pattern, re);
  }
  return re.test(wholeCharacters(value)) ? words : undefined;
}

/**
 * What an unknown field's error adds for a message that also has no address: a
 * message's schema takes `to` and `room` but requires neither (the route checks
 * "exactly one", messages.ts `checkAddressing`, after the schema), so `{"too": "ann"}`
 * would otherwise be told only of `too` (a newcomer's finding). Needs the error's
 * `data` and `parentSchema` (Ajv's `verbose`); '' for any other object.
 */
function unaddressed(e: ErrorObject): string {
  const known = (e.parentSchema as { properties?: Record<string, unknown> } | undefined)?.properties;
  const data = e.data;
  if (known === undefined || !Object.hasOwn(known, 'to') || !Object.hasOwn(known, 'room')) return '';
  if (typeof data !== 'object' || data === null || Object.hasOwn(data, 'to') || Object.hasOwn(data, 'room')) return '';
  return ' (and has neither "to" nor "room": give one)';
}

/** The units a ttl's limit is also said in, the largest that divides it: seconds in one, and its name. */
const TTL_UNITS: readonly (readonly [number, string])[] = [[86_400, 'day'], [3600, 'hour'], [60, 'minute']];

/**
 * What a message's `ttl` of the wrong type or out of range adds: its unit, as `"ttl":
 * "1d"` or `1.5` told only "must be an integer" left a newcomer to guess it (walk2 L5),
 * and a limit in whole days, hours or minutes too (`must be at most 2592000 (whole
 * seconds: 30 days)`: review4). `ttl` is a message's (a batch item's, a broadcast's)
 * field alone, in whole seconds (schemas.ts ttlSeconds); '' for any other field.
 * @param limit the bound the value broke, seconds, for a `minimum` or `maximum`
 */
function inSeconds(e: ErrorObject, limit?: number): string {
  if (!/(^|\/)ttl$/.test(e.instancePath)) return '';
  const unit = limit === undefined ? undefined : TTL_UNITS.find(([seconds]) => limit % seconds === 0);
  return limit === undefined || unit === undefined ? ' (whole seconds)' : ` (whole seconds: ${count(limit / unit[0], unit[1])})`;
}

/**
 * What an unknown field adds when it is `messages` in the body of `POST /v1/messages`
 * (a message's schema: it has `to` and `room`; `path` is `body`, not a batch item's
 * `messages/3`): a batch posted to the single message's route, which a newcomer
 * otherwise learns from the docs (walk2 L5). '' for any other field or object.
 * @param path the object's path as the answer names it (`body`, `messages/0`)
 * @param e the error Ajv reported on that object (needs `verbose`, for `parentSchema`)
 * @param field the unknown field
 */
export function misdirectedBatch(path: string, e: ErrorObject, field: string): string {
  const known = (e.parentSchema as { properties?: Record<string, unknown> } | undefined)?.properties;
  if (path !== 'body' || field !== 'messages' || known === undefined || !Object.hasOwn(known, 'to') || !Object.hasOwn(known, 'room')) return '';
  return '; a batch goes to POST /v1/messages/batch';
}

/**
 * What an unknown field adds when it is a message's field (`type`, `data`, `to`, `ttl`,
 * …) in the body of `POST /v1/messages/batch` (its schema has `messages`; `path` is
 * `body`): a batch's fields are each item's, and `{"messages": [...], "type": "t",
 * "data": 1}` told only of an unknown field left a newcomer to guess where they go
 * (review4). Names every message field the body holds, in its order. '' for any other
 * field or object.
 * @param path the object's path as the answer names it (`body`)
 * @param e the error Ajv reported on that object (needs `verbose`, for `data` and `parentSchema`)
 * @param field the unknown field
 */
export function outsideBatchItems(path: string, e: ErrorObject, field: string): string {
  const known = (e.parentSchema as { properties?: Record<string, unknown> } | undefined)?.properties;
  const data = e.data;
  if (path !== 'body' || known === undefined || !Object.hasOwn(known, 'messages') || !Object.hasOwn(messageBody.properties, field)) return '';
  if (typeof data !== 'object' || data === null) return '';
  const fields = Object.keys(data).filter((k) => !Object.hasOwn(known, k) && Object.hasOwn(messageBody.properties, k));
  return `; ${either(fields, 'and')} ${fields.length === 1 ? 'goes' : 'go'} inside each item of messages: `
    + '{"messages": [{"to": …, "type": …, "data": …}, …]}';
}

/**
 * The field an object has that its schema does not allow (`additionalProperties:
 * false`), for an error Ajv reported on that object before it looked at its fields
 * (a `required` one: Ajv checks `required` first). Needs the error's `data` and
 * `parentSchema`, which Ajv adds with its `verbose` option.
 * @returns the first unknown field, or undefined when there is none or it cannot tell
 */
export function unknownFieldOf(e: ErrorObject): string | undefined {
  const schema = e.parentSchema as { additionalProperties?: unknown; patternProperties?: unknown; properties?: Record<string, unknown> } | undefined;
  const data = e.data;
  if (schema?.additionalProperties !== false || schema.patternProperties !== undefined || typeof data !== 'object' || data === null || Array.isArray(data)) return undefined;
  const known = schema.properties ?? {};
  return Object.keys(data).find((k) => !Object.hasOwn(known, k));
}
