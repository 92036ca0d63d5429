/**
 * The API token check (src/auth/api-token.ts, DESIGN.md §7): the right token passes in
 * any accepted spelling of the header, anything else is UNAUTHORIZED, also after the
 * right one was accepted and remembered, and however many accepted spellings came.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ACCEPTED_HEADERS_KEPT, apiTokenChecker } from '../../src/auth/api-token.js';
import { PixiuError } from '../../src/errors.js';

const TOKEN = 'api-token-0123456789abcdef';
const refused = (check: (h: string | undefined) => void, header: string | undefined): void => {
  assert.throws(() => check(header), (err: unknown) => err instanceof PixiuError && err.code === 'UNAUTHORIZED', `${String(header)} is refused`);
};

test('the right token passes, and wrong ones are refused before and after it was accepted', () => {
  const check = apiTokenChecker(TOKEN);
  // A header is `Bearer <token>` and nothing more (RFC 6750 §2.1): the right token
  // followed by anything but white space is refused, not read up to the first space.
  const wrong = [undefined, '', 'Bearer', `Bearer${TOKEN}`, `Bearer ${TOKEN}x`, `Bearer ${TOKEN} extra`, `Bearer ${TOKEN}\tx`, `Bearer ${TOKEN} ${TOKEN}`, `Bearer ${TOKEN.slice(0, -1)}`, `Basic ${TOKEN}`, TOKEN, `Bearer ${TOKEN.toUpperCase()}`];
  for (const h of wrong) refused(check, h);
  check(`Bearer ${TOKEN}`);
  check(`Bearer ${TOKEN}`);
  for (const h of wrong) refused(check, h);
});

test('many accepted spellings of the header all pass, and a wrong token still does not', () => {
  const check = apiTokenChecker(TOKEN);
  // `Bearer`, any case, one or more spaces, trailing white space: RFC 6750 §2.1 as bearerToken reads it.
  const spellings = Array.from({ length: 3 * ACCEPTED_HEADERS_KEPT }, (_, i) =>
    `${i % 2 === 0 ? 'Bearer' : 'bEaReR'}${' '.repeat(1 + (i % 5))}${TOKEN}${' '.repeat(Math.floor(i / 5))}`);
  for (let round = 0; round < 2; round++) {
    for (const h of spellings) check(h);
    refused(check, `Bearer ${TOKEN}-not`);
  }
});

test('the header must start with Bearer: the right token after another scheme, or after text glued to Bearer, is refused', () => {
  const check = apiTokenChecker(TOKEN);
  for (const h of [`Basic Bearer ${TOKEN}`, `xBearer ${TOKEN}`, `Token Bearer ${TOKEN}`, ` Bearer ${TOKEN}`]) refused(check, h);
  check(`Bearer ${TOKEN}`);
});
