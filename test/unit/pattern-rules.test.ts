import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hasWords, wordedPattern } from '../../src/api/pattern-rules.js';
import { USER_ID_PATTERN } from '../../src/api/schemas.js';
import { describeErrors } from '../../src/api/validation.js';
import { bodySchemaValidator } from '../../src/api/route-validators.js';

/** describeErrors of `value` against a string schema with `pattern`. */
function refusal(pattern: string, value: string): string {
  const validate = bodySchemaValidator({ type: 'object', properties: { f: { type: 'string', pattern } } });
  assert.equal(validate({ f: value }), false);
  return describeErrors('body', validate.errors);
}

test('a pattern declared with words is refused with them', () => {
  assert.equal(refusal(USER_ID_PATTERN, 'a\u0001b'), 'body/f must be 1–128 characters, no whitespace, control characters or lone surrogates');
  const digits = wordedPattern('^[0-9]{3}$', 'three decimal digits');
  assert.equal(refusal(digits, '12a'), 'body/f must be three decimal digits');
});

test('a pattern declared without words is refused in general terms, never with the pattern', () => {
  const pattern = '^[a-z]\\d+$';
  assert.equal(hasWords(pattern), false);
  const message = refusal(pattern, 'A1');
  assert.equal(message, 'body/f has characters that are not allowed');
  assert.doesNotMatch(message, /pattern|\\/);
});

test('one pattern has one wording: declaring it again with the same words is fine, with others an error', () => {
  const pattern = '^[xy]{2}$';
  assert.equal(wordedPattern(pattern, 'two of x and y'), pattern);
  assert.equal(wordedPattern(pattern, 'two of x and y'), pattern);
  assert.throws(() => wordedPattern(pattern, 'xx, xy, yx or yy'), /declared twice with other words/);
  assert.equal(refusal(pattern, 'zz'), 'body/f must be two of x and y');
});

test('the user id rule refuses exactly what docs/api.md calls whitespace: JavaScript \\s, U+FEFF included, not format characters', () => {
  const validate = bodySchemaValidator({ type: 'object', properties: { f: { type: 'string', pattern: USER_ID_PATTERN } } });
  for (const space of [' ', '\t', '\u00a0', '\u2003', '\u3000', '\u2028', '\ufeff']) {
    assert.equal(validate({ f: `a${space}b` }), false, `U+${space.codePointAt(0)?.toString(16)} is whitespace`);
  }
  for (const format of ['\u200b', '\u200d', '\u2060']) {
    assert.equal(validate({ f: `a${format}b` }), true, `U+${format.codePointAt(0)?.toString(16)} is allowed`);
  }
});
