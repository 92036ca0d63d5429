/**
 * The service and the CLI import jose's modules one by one (`jose/jwt/verify`,
 * `jose/errors`, …), never its index, which loads every JWE, JWS, JWK and key module:
 * ~0.04 s of CPU of every start (src/auth/jwt.ts). Types may still come from the index.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// The sources beside this test's tree: src/ (tsx) or .test-build/src/ (the compiled build).
const SRC = fileURLToPath(new URL('../../src/', import.meta.url));

test('no module of src/ imports jose\'s index at run time (types alone may come from it)', () => {
  const files = readdirSync(SRC, { recursive: true, encoding: 'utf8' }).filter((f) => /\.[jt]s$/.test(f) && !f.endsWith('.d.ts'));
  assert.ok(files.length > 100);
  const offenders = files.filter((f) => {
    const text = readFileSync(path.join(SRC, f), 'utf8');
    // `import { x } from 'jose'`, `import('jose')`, `export … from 'jose'`; not `import type`.
    return /^\s*(import(?!\s+type\b)|export)\b[^;]*?\bfrom\s+['"]jose['"]|\bimport\(\s*['"]jose['"]\s*\)/m.test(text);
  });
  assert.deepEqual(offenders, []);
});
