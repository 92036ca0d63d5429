/**
 * The id patterns as the OpenAPI document publishes them: with the characters they
 * refuse written out as ranges of `\uXXXX` escapes, not as `\s`, `\p{Cc}` and `\p{Cs}`.
 *
 * The server checks ids with `[^\s\p{Cc}\p{Cs}]` (schemas.ts), which JSON Schema 2020-12
 * reads as ECMA-262 with the u flag. Other engines read it otherwise: Python's `re` has
 * no `\p{…}` and fails to compile it; Java without UNICODE_CHARACTER_CLASS reads `\s`
 * as ASCII only, so a client check built from the document passed ids the server
 * refuses (U+00A0, U+3000, U+FEFF; a contract tester's finding). Ranges of `\uXXXX`
 * escapes read alike in ECMA-262, Python's `re` and Java.
 *
 * Escapes, not the characters themselves (as the document first had them): the
 * surrogates U+D800 and U+DFFF written into the JSON text are lone-surrogate escapes,
 * which strict JSON parsers (jq, Rust's serde_json, Swift) refuse, making the whole
 * document unreadable to them; and U+2028/U+2029 are line terminators in JavaScript, so
 * a generator that copies the pattern into a regex literal (openapi-zod-client,
 * @hey-api/openapi-ts) wrote code that did not compile (a contract tester's F1). With
 * escapes the pattern is printable ASCII. The cost: RE2 (Go) has no `\u` escape (its
 * spelling is `\x{2028}`) and refuses to compile it; docs/api.md ("Input rules") says
 * how a Go client reads it, docs/decisions.md why. The server keeps its own pattern,
 * which follows the Unicode version of the runtime; a test checks both agree on every
 * code point.
 *
 * The MsgID's pattern is published stricter than the answers' schemas hold it: its
 * whole rule ({@link MSG_ID_PATTERN}: a kind 01–04, a counter not 0), in place of the
 * shape only, which fast-json-stringify tests on every id it serialises through an
 * `anyOf` (schemas.ts `msgId`). A unit test checks the whole rule against the decoder.
 */
import { MSG_ID_HEX_PATTERN, MSG_ID_PATTERN } from '../ids/msg-id.js';
import { wordedPattern, wordsOf } from './pattern-rules.js';

/** What `[^\s\p{Cc}\p{Cs}]` leaves out, in its source form. */
const SHORTHAND = '\\s\\p{Cc}\\p{Cs}';

/**
 * The code points `\s`, `\p{Cc}` and `\p{Cs}` match (ECMA-262 with the u flag, Unicode
 * 15): C0 controls and space (U+0000–U+0020), DEL, C1 controls and U+00A0
 * (U+007F–U+00A0), the other Unicode White_Space (U+1680, U+2000–U+200A, U+2028,
 * U+2029, U+202F, U+205F, U+3000), U+FEFF and the surrogates (U+D800–U+DFFF), as a
 * class body of regex escapes `\uXXXX` (a backslash and a `u` in the pattern's text:
 * printable ASCII only, see the module comment).
 */
export const REFUSED_RANGES = '\\u0000-\\u0020\\u007f-\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff\\ud800-\\udfff';

/** Patterns the document publishes whole in place of the shape the answers' schemas hold. */
const PUBLISHED_WHOLE = new Map([
  [MSG_ID_HEX_PATTERN, wordedPattern(MSG_ID_PATTERN, 'a message id: 16 lower-case hex digits, digits 3–4 its kind (01–04), the last 12 a counter, not all 0')],
]);

/**
 * `pattern` as the document publishes it: the whole rule for a shape listed above;
 * else with `\s\p{Cc}\p{Cs}` written as {@link REFUSED_RANGES}, declared with the
 * same words as `pattern` (pattern-rules.ts); else `pattern` itself.
 */
export function portablePattern(pattern: string): string {
  const whole = PUBLISHED_WHOLE.get(pattern);
  if (whole !== undefined) return whole;
  if (!pattern.includes(SHORTHAND)) return pattern;
  const portable = pattern.replaceAll(SHORTHAND, REFUSED_RANGES);
  const words = wordsOf(pattern);
  return words === undefined ? portable : wordedPattern(portable, words);
}

/**
 * A `transformObject` for @fastify/swagger: every `pattern` string of the document
 * through {@link portablePattern}, in place.
 * @param doc the generated document
 * @returns `doc`
 */
export function withPortablePatterns<T extends object>(doc: T): T {
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) {
      for (const item of node) visit(item);
      return;
    }
    if (node === null || typeof node !== 'object') return;
    const record = node as Record<string, unknown>;
    for (const [key, value] of Object.entries(record)) {
      if (key === 'pattern' && typeof value === 'string') record[key] = portablePattern(value);
      else visit(value);
    }
  };
  visit(doc);
  return doc;
}
