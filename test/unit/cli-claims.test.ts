/**
 * The CLI's claim helpers (src/cli/claims.ts): a comma-separated option is its entries,
 * trimmed, empty ones and repeats dropped, and one given with no entry is refused; a token fits a connect request's headers when it leaves
 * 512 bytes of Node's header limit for the request line and the other headers.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { maxHeaderSize } from 'node:http';
import { fitsRequestHeaders, listOption } from '../../src/cli/claims.js';

test('a comma-separated option is its entries, trimmed, empty ones and repeats dropped; given with no entry, it is refused naming the flag', () => {
  assert.deepEqual(listOption(' a , b,,c ,', '--tags'), ['a', 'b', 'c']);
  assert.deepEqual(listOption('vip,vip, vip,b', '--tags'), ['vip', 'b']);
  assert.deepEqual(listOption(undefined, '--tags'), []);
  for (const text of ['', ' , ', ',']) {
    assert.throws(() => listOption(text, '--channels'), { name: 'StartupError', message: `--channels ${JSON.stringify(text)} lists nothing: give one or more comma-separated entries, or leave --channels out` });
  }
});

test('a token fits the request headers with 512 bytes left for the rest, and not a byte more', () => {
  assert.equal(fitsRequestHeaders('x'.repeat(maxHeaderSize - 512)), true);
  assert.equal(fitsRequestHeaders('x'.repeat(maxHeaderSize - 511)), false);
  // Counted in UTF-8 bytes, not characters.
  assert.equal(fitsRequestHeaders('é'.repeat((maxHeaderSize - 510) / 2)), false);
});
