/**
 * The CLI's claim helpers (src/cli/claims.ts): a comma-separated option is its entries,
 * trimmed, empty ones dropped; a token fits a connect request's headers when it leaves
 * 512 bytes of Node's header limit for the request line and the other headers.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { maxHeaderSize } from 'node:http';
import { fitsRequestHeaders, listOption } from '../../src/cli/claims.js';

test('a comma-separated option is its entries, trimmed, empty ones dropped', () => {
  assert.deepEqual(listOption(' a , b,,c ,'), ['a', 'b', 'c']);
  assert.deepEqual(listOption(undefined), []);
  assert.deepEqual(listOption(' , '), []);
});

test('a token fits the request headers with 512 bytes left for the rest, and not a byte more', () => {
  assert.equal(fitsRequestHeaders('x'.repeat(maxHeaderSize - 512)), true);
  assert.equal(fitsRequestHeaders('x'.repeat(maxHeaderSize - 511)), false);
  // Counted in UTF-8 bytes, not characters.
  assert.equal(fitsRequestHeaders('é'.repeat((maxHeaderSize - 510) / 2)), false);
});
