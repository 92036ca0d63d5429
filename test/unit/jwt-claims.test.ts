/**
 * Client JWTs whose signature holds but whose claims do not (src/auth/jwt.ts): the
 * answer names the claim (the key's holder can fix it; nobody else learns anything),
 * while a token signed with another key stays a bare "invalid token".
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SignJWT } from 'jose';
import { createVerifier } from '../../src/auth/jwt.js';

const SECRET = 'jwt-claims-test-secret-of-32-chars-or-more';
const key = new TextEncoder().encode(SECRET);
const verify = createVerifier({ kind: 'secret', secret: SECRET });

function sign(claims: { sub?: string; exp?: number; nbf?: number }, secret = key): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).sign(secret);
}

test('a token without exp or sub names the missing claim; a future nbf names nbf', async () => {
  const now = Math.floor(Date.now() / 1000);
  await assert.rejects(verify(await sign({ sub: 'ana' })), { code: 'UNAUTHORIZED', message: 'invalid token: missing required "exp" claim' });
  await assert.rejects(verify(await sign({ exp: now + 60 })), { code: 'UNAUTHORIZED', message: 'invalid token: missing required "sub" claim' });
  await assert.rejects(verify(await sign({ sub: 'ana', exp: now + 60, nbf: now + 3600 })), { code: 'UNAUTHORIZED', message: /^invalid token: .*"nbf"/ });
  assert.equal((await verify(await sign({ sub: 'ana', exp: now + 60 }))).user, 'ana');
});

test('a token signed with another key says only "invalid token", whatever its claims', async () => {
  const other = new TextEncoder().encode('another-secret-of-at-least-32-characters');
  await assert.rejects(verify(await sign({ sub: 'ana' }, other)), { code: 'UNAUTHORIZED', message: 'invalid token' });
});
