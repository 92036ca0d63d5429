/**
 * A close frame's reason (src/gateway/close-log.ts `closeReason`): at most 123 bytes of
 * UTF-8 (RFC 6455 §5.5.1; `ws` throws past it), cut on a character boundary — never
 * half of a surrogate pair, which would go out as U+FFFD.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { closeReason } from '../../src/gateway/close-log.js';

test('a short reason is kept as is', () => {
  assert.equal(closeReason('token expired'), 'token expired');
  assert.equal(closeReason('x'.repeat(123)), 'x'.repeat(123));
});

test('a reason of emoji is cut to whole emoji within 123 bytes, with no lone surrogate left at the end', () => {
  const cut = closeReason('😀'.repeat(100));
  // 30 emoji are 120 bytes; a 31st would be 124.
  assert.equal(cut, '😀'.repeat(30));
  assert.equal(Buffer.from(cut).toString(), cut, 'encodes to UTF-8 and back unchanged');
});

test('a reason of three-byte characters is cut to whole characters within 123 bytes', () => {
  const cut = closeReason('€'.repeat(120));
  assert.equal(cut, '€'.repeat(41));
  assert.equal(Buffer.byteLength(cut), 123);
});
