/**
 * The `pixiu` command (DESIGN.md §10): `token` mints a client JWT with the data dir's
 * secret, `serve --help` lists the settings by environment name, and bad input exits
 * 1 with a message saying what was wrong.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { createVerifier } from '../../src/auth/jwt.js';
import { runCli, tempDataDir } from '../harness/pixiu-server.js';

test('pixiu token <uid> --tags a,b --ttl 1h prints a JWT that verifies with the data dir secret', async (t) => {
  const dataDir = await tempDataDir(t);
  const run = await runCli(['token', 'ann', '--tags', 'a,b', '--ttl', '1h'], { PIXIU_DATA_DIR: dataDir });
  assert.equal(run.code, 0, run.stderr);
  const token = run.stdout.trim();
  assert.match(token, /^[\w-]+\.[\w-]+\.[\w-]+$/);
  const secret = (await readFile(path.join(dataDir, 'secrets', 'jwt-secret'), 'utf8')).trim();
  const claims = await createVerifier({ kind: 'secret', secret })(token);
  assert.equal(claims.user, 'ann');
  assert.deepEqual(claims.tags, ['a', 'b']);
  assert.ok(Math.abs(claims.expiresAtMs - (Date.now() + 3_600_000)) < 60_000, `exp ${claims.expiresAtMs}`);
  await assert.rejects(createVerifier({ kind: 'secret', secret: 'another-secret-of-at-least-32-chars!' })(token), /invalid token/);
});

test('pixiu token signs with PIXIU_JWT_SECRET when it is set', async (t) => {
  const secret = 'a-configured-secret-of-32-chars-or-more';
  const run = await runCli(['token', 'bo'], { PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_JWT_SECRET: secret });
  assert.equal(run.code, 0, run.stderr);
  assert.equal((await createVerifier({ kind: 'secret', secret })(run.stdout.trim())).user, 'bo');
});

test('pixiu token with a bad user id or --ttl exits 1 with a clear message', async (t) => {
  const env = { PIXIU_DATA_DIR: await tempDataDir(t) };
  const badUid = await runCli(['token', 'a b'], env);
  assert.equal(badUid.code, 1);
  assert.equal(badUid.stdout, '');
  assert.match(badUid.stderr, /invalid user id "a b"/);
  for (const ttl of ['soon', '0', '500ms']) {
    const badTtl = await runCli(['token', 'ann', '--ttl', ttl], env);
    assert.equal(badTtl.code, 1, ttl);
    assert.equal(badTtl.stdout, '');
    assert.match(badTtl.stderr, new RegExp(`invalid --ttl "${ttl}"`));
  }
});

test('pixiu serve --help exits 0 and lists the settings by environment name', async () => {
  const run = await runCli(['serve', '--help']);
  assert.equal(run.code, 0, run.stderr);
  for (const name of ['PIXIU_PORT', 'PIXIU_REDIS_URL', 'PIXIU_DATA_DIR', 'PIXIU_API_TOKEN']) assert.match(run.stdout, new RegExp(name));
});

test('pixiu serve with PIXIU_PORT=abc exits 1 naming PIXIU_PORT', async (t) => {
  const run = await runCli(['serve'], { PIXIU_PORT: 'abc', PIXIU_DATA_DIR: await tempDataDir(t) });
  assert.equal(run.code, 1);
  assert.match(run.stderr, /PIXIU_PORT="abc" is not valid/);
  assert.doesNotMatch(run.stderr, /\bat .*\.[jt]s:\d+/, 'a message, not a stack trace');
});
