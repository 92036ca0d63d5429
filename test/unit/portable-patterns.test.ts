/**
 * The id patterns the OpenAPI document publishes (src/api/portable-patterns.ts) against
 * the server's own (`\s\p{Cc}\p{Cs}`, src/api/schemas.ts): the same rule, on every code
 * point, lone surrogates included, and with the same words; written in printable ASCII
 * (`\uXXXX` escapes), and read by the server's Ajv as the raw characters it first
 * published were.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isUserId, USER_ID_PATTERN } from '../../src/api/schemas.js';
import { portablePattern, REFUSED_RANGES, withPortablePatterns } from '../../src/api/portable-patterns.js';
import { patternFailure } from '../../src/api/pattern-rules.js';
import { bodySchemaValidator } from '../../src/api/route-validators.js';
import { tagSchema } from '../../src/broadcast/filter.js';

test('the published user-id and tag patterns refuse exactly what the server\'s refuse, on every code point', () => {
  for (const pattern of [USER_ID_PATTERN, tagSchema.pattern]) {
    const published = portablePattern(pattern);
    assert.ok(!/\\[sp]/.test(published), `no \\s or \\p in ${JSON.stringify(published)}`);
    const server = new RegExp(pattern, 'u');
    const document = new RegExp(published, 'u');
    const differ: string[] = [];
    for (let c = 0; c <= 0x10ffff; c++) {
      const id = `a${String.fromCodePoint(c)}b`;
      if (server.test(id) !== document.test(id)) differ.push(c.toString(16));
    }
    assert.deepEqual(differ, [], pattern);
    assert.equal(patternFailure(published), patternFailure(pattern), 'the same words');
  }
});

test('the samples a client library meets: no-break and ideographic spaces, the BOM, a line separator, tab, DEL and a lone surrogate refused; ASCII and emoji taken', () => {
  const published = new RegExp(portablePattern(USER_ID_PATTERN), 'u');
  const refused = ['\u00a0', '\u3000', '\ufeff', '\u2028', '\t', '\u007f', '\ud800', '\udfff', ' '];
  const taken = ['alice', 'bob_1:x/y', '\u{1f600}', '小明', '\u200b', 'é'];
  for (const ch of refused) {
    assert.equal(isUserId(`a${ch}b`), false, `server ${ch.codePointAt(0)?.toString(16)}`);
    assert.equal(published.test(`a${ch}b`), false, `published ${ch.codePointAt(0)?.toString(16)}`);
  }
  for (const id of taken) {
    assert.equal(isUserId(id), true, `server ${id}`);
    assert.equal(published.test(id), true, `published ${id}`);
  }
  // 128 emoji: 128 characters, 256 UTF-16 units, taken by both (read per code point).
  assert.ok(isUserId('\u{1f600}'.repeat(128)) && published.test('\u{1f600}'.repeat(128)));
  assert.ok(!published.test('\u{1f600}'.repeat(129)));
});

test('the published patterns are printable ASCII: the refused characters as \\uXXXX escapes, no raw control, line separator or surrogate; the document\'s other patterns are left as they are', () => {
  for (const pattern of [USER_ID_PATTERN, tagSchema.pattern]) {
    const published = portablePattern(pattern);
    assert.match(published, /^[\x20-\x7e]+$/, JSON.stringify(published));
    // What the JSON text of the document holds: no \uXXXX JSON escape at all, so no lone surrogate.
    assert.equal(JSON.stringify(published), `"${published.replaceAll('\\', '\\\\')}"`);
    assert.ok(published.includes('\\u2028\\u2029') && published.includes('\\ud800-\\udfff'), published);
  }
  const doc = { a: { pattern: USER_ID_PATTERN }, b: [{ pattern: '^[A-Za-z]$' }], properties: { pattern: { type: 'string' } } };
  withPortablePatterns(doc);
  assert.equal(doc.a.pattern, portablePattern(USER_ID_PATTERN));
  assert.equal(doc.b[0]?.pattern, '^[A-Za-z]$');
  assert.deepEqual(doc.properties.pattern, { type: 'string' });
});

/** The refused characters as the document first published them: the characters themselves (before the contract tester's F1). */
const RAW_RANGES = '\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff\ud800-\udfff';

test('the server\'s Ajv gives the escaped pattern the verdicts it gave the raw characters and gives its own pattern: lone surrogates, U+0000, U+2028/9, spaces, 128 and 129 characters', () => {
  const samples = [
    'alice', 'a', '', ' ', 'a b', 'a\tb', 'a\nb', 'alice\n', '\u0000', 'a\u0000b', 'a\u001fb', 'a\u007fb', 'a\u0080b', 'a\u00a0b', 'a\u00a1b',
    'a\u1680b', 'a\u2000b', 'a\u200ab', 'a\u200bb', 'a\u2028b', 'a\u2029b', 'a\u202fb', 'a\u205fb', 'a\u3000b', 'a\ufeffb', 'a\ufffdb',
    '\ud800', '\udfff', 'a\ud800b', 'a\udc00b', '\udc00\ud800', 'a\ud83d', '\ude00a', '\u{1f600}', '\ud83d\ude00x', '小明', 'é', 'e\u0301',
    'a'.repeat(64), 'a'.repeat(65), 'a'.repeat(128), 'a'.repeat(129), '\u{1f600}'.repeat(64), '\u{1f600}'.repeat(65),
    '\u{1f600}'.repeat(128), '\u{1f600}'.repeat(129), `${'a'.repeat(127)}\ud800`, `${'a'.repeat(127)} `, '\u{10ffff}', '\u{e0001}',
  ];
  for (const pattern of [USER_ID_PATTERN, tagSchema.pattern]) {
    const validator = (p: string) => bodySchemaValidator({ type: 'object', properties: { id: { type: 'string', pattern: p } } });
    const server = validator(pattern);
    const escaped = validator(portablePattern(pattern));
    const raw = validator(portablePattern(pattern).replace(REFUSED_RANGES, RAW_RANGES));
    assert.notEqual(portablePattern(pattern).replace(REFUSED_RANGES, RAW_RANGES), portablePattern(pattern));
    let taken = 0;
    for (const id of samples) {
      const verdict = server({ id });
      assert.equal(escaped({ id }), verdict, `escaped ${JSON.stringify(id)} under ${pattern}`);
      assert.equal(raw({ id }), verdict, `raw ${JSON.stringify(id)} under ${pattern}`);
      if (verdict) taken++;
    }
    assert.ok(taken > 10 && taken < samples.length - 20, `${taken} of ${samples.length} taken`);
  }
});
