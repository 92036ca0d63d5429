/**
 * The rules of the secret settings, checked when the configuration is loaded (before
 * Redis or the store start) and applied alike to the secrets kept in the data dir:
 * a PEM key that cannot be read, an API token no client can send, a kept jwt-secret
 * or api-token that is too short or empty.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config/config.js';
import { loadSecrets, resolveJwtKey } from '../../src/auth/secrets.js';
import { StartupError } from '../../src/errors.js';
import { publicKeyProblem } from '../../src/auth/pem-key.js';
import { fill, smallDisk } from '../harness/small-disk.js';

const ecPem = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' }).toString();

function refused(env: Record<string, string>, expected: RegExp, hidden: string): void {
  assert.throws(() => loadConfig(env), (err: unknown) => {
    assert.ok(err instanceof StartupError);
    assert.match(err.message, expected);
    assert.ok(!err.message.includes(hidden), `the value is shown: ${err.message}`);
    return true;
  });
}

test('a PEM key written with the two characters \\n (env files, Kubernetes) is read as the key', () => {
  const escaped = ecPem.trimEnd().replace(/\n/g, '\\n');
  assert.equal(loadConfig({ PIXIU_JWT_PUBLIC_KEY: escaped }).jwtPublicKey, ecPem.trimEnd());
  assert.equal(loadConfig({ PIXIU_JWT_PUBLIC_KEY: ecPem.replace(/\n/g, '\\r\\n') }).jwtPublicKey, ecPem);
  assert.equal(loadConfig({ PIXIU_JWT_PUBLIC_KEY: ecPem }).jwtPublicKey, ecPem);
});

test('a PEM key that cannot be read is a configuration error naming PIXIU_JWT_PUBLIC_KEY, not OpenSSL\'s', () => {
  const body = ecPem.split('\n')[1] as string;
  const broken = ecPem.replace('-----END', 'AAAAjunk\n-----END');
  refused({ PIXIU_JWT_PUBLIC_KEY: broken }, /PIXIU_JWT_PUBLIC_KEY is not valid: it is not a readable PEM public key.*\(the value is not shown\)/, body);
  assert.throws(() => loadConfig({ PIXIU_JWT_PUBLIC_KEY: broken }), (err: unknown) => !/DECODER|error:1E/.test((err as Error).message));
  const k1 = generateKeyPairSync('ec', { namedCurve: 'secp256k1' }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
  refused({ PIXIU_JWT_PUBLIC_KEY: k1 }, /PIXIU_JWT_PUBLIC_KEY is not valid: it is an EC key on curve secp256k1; accepted curves: P-256/, k1.split('\n')[1] as string);
  const x448 = generateKeyPairSync('ed448').publicKey.export({ type: 'spki', format: 'pem' }).toString();
  refused({ PIXIU_JWT_PUBLIC_KEY: x448 }, /PIXIU_JWT_PUBLIC_KEY is not valid: it is a ed448 key; accepted: RSA, EC/, x448.split('\n')[1] as string);
  // Every curve the docs accept loads: P-256, P-384, P-521 (ES256, ES384, ES512).
  for (const namedCurve of ['P-256', 'P-384', 'P-521']) {
    const pem = generateKeyPairSync('ec', { namedCurve }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
    assert.equal(loadConfig({ PIXIU_JWT_PUBLIC_KEY: pem }).jwtPublicKey, pem, namedCurve);
  }
});

test('a PEM key that would start and then refuse every token, or that holds more than the key, is refused at start', () => {
  const pss = generateKeyPairSync('rsa-pss', { modulusLength: 2048 }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
  refused({ PIXIU_JWT_PUBLIC_KEY: pss }, /PIXIU_JWT_PUBLIC_KEY is not valid: it is an RSA-PSS \(id-RSASSA-PSS\) key.*plain RSA public key/, pss.split('\n')[1] as string);
  const short = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
  refused({ PIXIU_JWT_PUBLIC_KEY: short }, /PIXIU_JWT_PUBLIC_KEY is not valid: it is an RSA key of 1024 bits; at least 2048/, short.split('\n')[1] as string);
  const pair = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const privatePem = pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const publicPem = pair.publicKey.export({ type: 'spki', format: 'pem' }).toString();
  refused({ PIXIU_JWT_PUBLIC_KEY: publicPem + privatePem }, /PIXIU_JWT_PUBLIC_KEY is not valid: it holds 2 PEM blocks; give one/, privatePem.split('\n')[1] as string);
  refused({ PIXIU_JWT_PUBLIC_KEY: publicPem + ecPem }, /it holds 2 PEM blocks/, ecPem.split('\n')[1] as string);
  refused({ PIXIU_JWT_PUBLIC_KEY: `junk\n${publicPem}` }, /it holds text outside its PEM block/, publicPem.split('\n')[1] as string);
  // The setting's own pattern refuses a private key first; the reader refuses it too, for its other callers.
  assert.match(publicKeyProblem(privatePem) ?? 'read', /^it is a private key; give its public key/);
  assert.equal(loadConfig({ PIXIU_JWT_PUBLIC_KEY: `\n${publicPem}\n\n` }).jwtPublicKey?.includes('BEGIN PUBLIC KEY'), true, 'blank lines around it are fine');
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
  assert.equal(loadConfig({ PIXIU_JWT_PUBLIC_KEY: rsa }).jwtPublicKey, rsa);
});

test('an API token no client can send (whitespace around or in it, non-ASCII) is refused, naming the rule', () => {
  const good = 'api-token-0123456789abcdef';
  assert.equal(loadConfig({ PIXIU_API_TOKEN: `${good}!~#` }).apiToken, `${good}!~#`);
  for (const bad of [`${good}\n`, ` ${good}`, `${good} `]) {
    refused({ PIXIU_API_TOKEN: bad }, /PIXIU_API_TOKEN is not valid: it holds leading or trailing whitespace; an API token is visible ASCII \(! to ~\) only/, good);
  }
  refused({ PIXIU_API_TOKEN: 'api-token 0123456789' }, /PIXIU_API_TOKEN is not valid: it holds whitespace;/, '0123456789');
  refused({ PIXIU_API_TOKEN: `${good}é` }, /PIXIU_API_TOKEN is not valid: it holds a character that is not visible ASCII;/, good);
});

test('a PIXIU_JWT_SECRET of only whitespace, or with whitespace at either end, is refused naming the rule, never the value (walk38 F3)', () => {
  const good = 'jwt-secret-0123456789abcdef-0123456789';
  assert.equal(loadConfig({ PIXIU_JWT_SECRET: `${good} inner space` }).jwtSecret, `${good} inner space`);
  refused({ PIXIU_JWT_SECRET: ' '.repeat(38) }, /PIXIU_JWT_SECRET is not valid: it is only whitespace, a key anyone could guess/, ' '.repeat(38));
  for (const bad of [`${good}\n`, ` ${good}`, `${good}\t`]) {
    refused({ PIXIU_JWT_SECRET: bad }, /PIXIU_JWT_SECRET is not valid: it begins or ends with whitespace \(a newline from a file, say\); the key is its exact bytes/, good);
  }
});

async function dataDirWith(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pixiu-secrets-'));
  await mkdir(path.join(dir, 'secrets'));
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(dir, 'secrets', name), text);
  return dir;
}

test('a kept jwt-secret or api-token is held to its setting\'s rules, and the error names the file', async (t) => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ 'jwt-secret': 'short\n', 'api-token': 'api-token-0123456789abcdef\n' }, /secrets\/jwt-secret is not valid: it is 5 characters long, under the minimum of 32 \(the value is not shown\).*set PIXIU_JWT_SECRET/],
    [{ 'jwt-secret': '' }, /secrets\/jwt-secret is not valid: it is 0 characters long/],
    [{ 'api-token': '\n' }, /secrets\/api-token is not valid: it is 0 characters long, under the minimum of 16.*set PIXIU_API_TOKEN/],
    [{ 'api-token': 'api-token-0123456789\u00e9abc' }, /secrets\/api-token is not valid: it holds a character that is not visible ASCII/],
  ];
  for (const [files, expected] of cases) {
    const dataDir = await dataDirWith(files);
    t.after(() => rm(dataDir, { recursive: true, force: true }));
    const config = loadConfig({ PIXIU_DATA_DIR: dataDir });
    await assert.rejects(loadSecrets(config), (err: unknown) => {
      assert.ok(err instanceof StartupError);
      assert.match(err.message, expected);
      assert.ok(!err.message.includes('short') && !err.message.includes('0123456789'), err.message);
      return true;
    }, JSON.stringify(files));
  }
});

test('pixiu token\'s read of an empty jwt-secret says what is wrong with the file', async (t) => {
  const dataDir = await dataDirWith({ 'jwt-secret': '' });
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  await assert.rejects(resolveJwtKey(loadConfig({ PIXIU_DATA_DIR: dataDir }), { create: false }), /jwt-secret is not valid: it is 0 characters long, under the minimum of 32/);
});

test('good kept secrets are read as before, trimmed', async (t) => {
  const dataDir = await dataDirWith({ 'jwt-secret': `${'s'.repeat(43)}\n`, 'api-token': `${'a'.repeat(43)}\n` });
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const secrets = await loadSecrets(loadConfig({ PIXIU_DATA_DIR: dataDir }));
  assert.equal(secrets.apiToken, 'a'.repeat(43));
  assert.deepEqual(secrets.jwt, { kind: 'secret', secret: 's'.repeat(43) });
  assert.deepEqual(secrets.generated, []);
});

test('a secret that cannot be written whole (a full disk at first start) leaves no file behind, and the next start generates it', async (t) => {
  const root = await smallDisk(t, '1m');
  if (root === undefined) return t.skip('cannot mount a tmpfs here (needs root)');
  const dataDir = path.join(root, 'data');
  await mkdir(path.join(dataDir, 'secrets'), { recursive: true, mode: 0o700 });
  const filler = await fill(root);
  const config = loadConfig({ PIXIU_DATA_DIR: dataDir });
  await assert.rejects(loadSecrets(config), (err: unknown) => err instanceof StartupError && /^cannot write .*\/secrets\/(api-token|jwt-secret): .*ENOSPC/.test(err.message));
  assert.deepEqual(await readdir(path.join(dataDir, 'secrets')), [], 'no empty or partial secret, no temporary file');
  await rm(filler);
  const secrets = await loadSecrets(config);
  assert.equal((await readFile(path.join(dataDir, 'secrets', 'api-token'), 'utf8')).trim(), secrets.apiToken);
  assert.deepEqual((await readdir(path.join(dataDir, 'secrets'))).sort(), ['api-token', 'jwt-secret']);
});

test('generated secrets are files of one line that their owner only may read (0600), with no temporary file left', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pixiu-secrets-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const secrets = await loadSecrets(loadConfig({ PIXIU_DATA_DIR: dataDir }));
  assert.deepEqual(secrets.generated, ['api-token', 'jwt-secret']);
  const dir = path.join(dataDir, 'secrets');
  assert.deepEqual((await readdir(dir)).sort(), ['api-token', 'jwt-secret']);
  for (const name of ['api-token', 'jwt-secret']) {
    assert.equal((await stat(path.join(dir, name))).mode & 0o777, 0o600, name);
    assert.match(await readFile(path.join(dir, name), 'utf8'), /^[A-Za-z0-9_-]{43}\n$/, name);
  }
});

test('a secret path that is a symbolic link to nothing is refused naming it, not retried for good; a temporary secret file a killed start left is removed', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pixiu-secrets-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const dir = path.join(dataDir, 'secrets');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await symlink(path.join(dataDir, 'nowhere'), path.join(dir, 'api-token'));
  const config = loadConfig({ PIXIU_DATA_DIR: dataDir });
  await assert.rejects(loadSecrets(config), (err: unknown) =>
    err instanceof StartupError && /^cannot read .*\/secrets\/api-token: it exists but does not open \(a symbolic link to a missing file\?\)/.test(err.message));
  await rm(path.join(dir, 'api-token'));
  // A start killed between writing its temporary file and linking it in place.
  const left = 'api-token.4194303.0a1b2c3d.tmp';
  await writeFile(path.join(dir, left), 'never-used-secret\n', { mode: 0o600 });
  await loadSecrets(config);
  assert.deepEqual((await readdir(dir)).sort(), ['api-token', 'jwt-secret']);
});

test('a temporary secret file of a start still running (its pid alive) is left alone: only those of dead processes are removed', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pixiu-secrets-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const dir = path.join(dataDir, 'secrets');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  // Another start writing its secret right now: this process's parent, alive, not this process.
  const live = `api-token.${process.ppid}.0a1b2c3d.tmp`;
  const dead = 'api-token.4194303.0a1b2c3d.tmp';
  await writeFile(path.join(dir, live), 'being-written\n', { mode: 0o600 });
  await writeFile(path.join(dir, dead), 'never-used-secret\n', { mode: 0o600 });
  await loadSecrets(loadConfig({ PIXIU_DATA_DIR: dataDir }));
  assert.deepEqual((await readdir(dir)).sort(), ['api-token', live, 'jwt-secret'].sort());
});

test('a kept jwt-secret is overridden (and named) by any configured JWT key source: a secret, a PEM public key or a JWKS URL', async (t) => {
  const dataDir = await dataDirWith({ 'jwt-secret': `${'s'.repeat(43)}\n` });
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const base = { PIXIU_DATA_DIR: dataDir, PIXIU_API_TOKEN: 'api-token-0123456789abcdef' };
  assert.deepEqual((await loadSecrets(loadConfig(base))).overridden, [], 'used, not overridden');
  for (const source of [{ PIXIU_JWT_SECRET: 'j'.repeat(40) }, { PIXIU_JWT_PUBLIC_KEY: ecPem }, { PIXIU_JWKS_URL: 'https://idp.example/jwks' }]) {
    assert.deepEqual((await loadSecrets(loadConfig({ ...base, ...source }))).overridden, ['jwt-secret'], Object.keys(source)[0]);
  }
});
