/**
 * The id patterns the OpenAPI document publishes (src/api/portable-patterns.ts) against
 * the server's own (`\s\p{Cc}\p{Cs}`, src/api/schemas.ts): the same rule, on every code
 * point, lone surrogates included, and with the same words.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isUserId, USER_ID_PATTERN } from '../../src/api/schemas.js';
import { portablePattern, REFUSED_RANGES, withPortablePatterns } from '../../src/api/portable-patterns.js';
import { patternFailure } from '../../src/api/pattern-rules.js';
import { tagSchema } from '../../src/broadcast/routes.js';

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

test('the ranges are literal characters, no escapes, and the document\'s other patterns are left as they are', () => {
  assert.ok(!REFUSED_RANGES.includes('\\'));
  const doc = { a: { pattern: USER_ID_PATTERN }, b: [{ pattern: '^[A-Za-z]$' }], properties: { pattern: { type: 'string' } } };
  withPortablePatterns(doc);
  assert.equal(doc.a.pattern, portablePattern(USER_ID_PATTERN));
  assert.equal(doc.b[0]?.pattern, '^[A-Za-z]$');
  assert.deepEqual(doc.properties.pattern, { type: 'string' });
});
