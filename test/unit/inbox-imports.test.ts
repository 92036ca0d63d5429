/**
 * src/inbox holds the inbox (Pi, DESIGN.md §1) and never reads the message store (Xiu):
 * what reads both for a page's entries is a reader's helper, in src/delivery
 * (entry-records.ts, moved there from src/inbox, review35 7). Types included: the
 * inbox's modules name no store type either.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// The sources beside this test's tree: src/ (tsx) or .test-build/src/ (the compiled build).
const INBOX = fileURLToPath(new URL('../../src/inbox/', import.meta.url));

test('no module of src/inbox imports from src/store', () => {
  const files = readdirSync(INBOX, { recursive: true, encoding: 'utf8' }).filter((f) => /\.[jt]s$/.test(f) && !f.endsWith('.d.ts'));
  assert.ok(files.length >= 10, files.join());
  const offenders = files.filter((f) => /\bfrom\s+['"](\.\.\/)+store\/|\bimport\(\s*['"](\.\.\/)+store\//.test(readFileSync(path.join(INBOX, f), 'utf8')));
  assert.deepEqual(offenders, []);
});
