/**
 * The id patterns as the OpenAPI document publishes them: with the characters they
 * refuse written out as ranges, not as `\s`, `\p{Cc}` and `\p{Cs}`.
 *
 * The server checks ids with `[^\s\p{Cc}\p{Cs}]` (schemas.ts), which JSON Schema 2020-12
 * reads as ECMA-262 with the u flag. Other engines read it otherwise: Python's `re` has
 * no `\p{…}` and fails to compile it; RE2 (Go) and Java without UNICODE_CHARACTER_CLASS
 * read `\s` as ASCII only, so a client check built from the document passed ids the
 * server refuses (U+00A0, U+3000, U+FEFF; a contract tester's finding). Ranges of
 * literal characters read alike in every engine; the document's JSON writes the
 * control characters and the surrogates as `\uXXXX` JSON escapes, which a JSON parser
 * turns back into the characters. The server keeps its own pattern, which follows the
 * Unicode version of the runtime; a test checks both agree on every code point.
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
 * U+2029, U+202F, U+205F, U+3000), U+FEFF and the surrogates (U+D800–U+DFFF), as the
 * characters themselves joined by `-` (a class body).
 */
export const REFUSED_RANGES = '\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff\ud800-\udfff';

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
