/**
 * `pixiu serve` from the outside (DESIGN.md §10, README): without `redis-server` it
 * exits 1 with the command that installs it; secrets it generates on a first start are
 * kept in the data dir, printed that once, and used again by the next start; and
 * `PIXIU_JWT_SECRET` is the HS256 key as its UTF-8 bytes; and a crash is logged.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer, type AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { SignJWT } from 'jose';
import { REDIS_INSTALL_HINT } from '../../src/redis/local-server.js';
import { expectError } from '../harness/checks.js';
import { PixiuClient, cleanupList, runCli, spawnServe, tempDataDir, type ServeProcess } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { TestClient, testToken } from '../harness/ws-client.js';

let redis: RedisServer;

before(async () => {
  redis = await RedisServer.start();
});

/** What {@link sharedServe} was started with: the API token, the JWT secret, the start-up warnings' causes. */
const SHARED = {
  apiToken: 'shared-serve-test-api-token-0123456789',
  /** Not ASCII: the HS256 key is its UTF-8 bytes. */
  jwtSecret: 'clé-secrète-🔑-pour-les-jetons-des-clients',
} as const;
const sharedCleanup = cleanupList();
let shared: Promise<ServeProcess> | undefined;

/**
 * One `pixiu serve` for the tests that look at a running node without changing how it
 * runs (its start-up warnings, its JWT key, its answers to uploads over the body limit):
 * started by the first of them to ask, with every setting they need (a start per test
 * cost some 1.3 s of CPU each); stopped after the file, its clean exit checked there.
 */
function sharedServe(): Promise<ServeProcess> {
  shared ??= (async () => spawnServe({
    PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: 'shared:', PIXIU_DATA_DIR: await tempDataDir(sharedCleanup), PIXIU_PORT: '0',
    PIXIU_LOG_LEVEL: 'info', PIXIU_API_TOKEN: SHARED.apiToken, PIXIU_JWT_SECRET: SHARED.jwtSecret,
    PIXIU_ALLOWED_ORIGINS: 'notaurl,https://app.example.com,https://app.example.com/login',
    PIXIU_PROT: '9000', PIXIU_MESSAGE_TTL: '86400', PIXIU_HEARTBEAT: '25s', PIXIU_MAX_BODY_BYTES: '4096', PIXIU_MAX_MESSAGE_BYTES: '4096',
  }, sharedCleanup))();
  return shared;
}

after(async () => {
  try {
    if (shared !== undefined) {
      const serve = await shared;
      assert.deepEqual(await serve.term(), { code: 0, signal: null }, serve.stderr());
    }
  } finally {
    await sharedCleanup.run();
    await redis?.destroy();
  }
});

/** A generated secret as serve prints it on stderr: where it is kept, and its value. */
interface Printed {
  readonly file: string;
  readonly value: string;
}

/** The generated secret `what` (`API token`, `HS256 secret`) printed on `stderr`, if any. */
function printed(stderr: string, what: string): Printed | undefined {
  const m = new RegExp(`^pixiu: generated the ${what}[^\\n]*; it is kept in (\\S+) and shown only now:\\n {2}(\\S+)$`, 'm').exec(stderr);
  return m === null ? undefined : { file: m[1] as string, value: m[2] as string };
}

/** Connects to `url` with `token` and resolves with the first frame's type and user. */
async function welcomeOf(url: string, token: string): Promise<{ t: string; user: unknown }> {
  const client = await TestClient.connect(url, { token, params: { device: 'phone' } });
  try {
    const first = await client.next();
    return { t: first.t, user: first.user };
  } finally {
    await client.close();
  }
}

test('without redis-server on PATH (and no PIXIU_REDIS_URL) serve exits 1 with the install command, then where the secrets it generated are kept', { timeout: 30_000 }, async (t) => {
  // node itself is run by its absolute path; the PATH it hands serve has nothing on it.
  const emptyBin = await mkdtemp(path.join(os.tmpdir(), 'pixiu-empty-path-'));
  t.after(() => rm(emptyBin, { recursive: true, force: true }));
  const dataDir = await tempDataDir(t);
  const run = await runCli(['serve'], { PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0', PIXIU_LOG_LEVEL: 'info', PATH: emptyBin });
  assert.deepEqual({ code: run.code, signal: run.signal }, { code: 1, signal: null }, run.stderr);
  assert.ok(run.stderr.includes(`pixiu: redis-server not found: ${REDIS_INSTALL_HINT}\n`), run.stderr);
  assert.match(run.stderr, /`sudo apt-get install -y redis-server`/, 'the install command, as the README gives it');
  assert.match(run.stderr, /PIXIU_REDIS_URL/, 'and the other way out');
  assert.doesNotMatch(run.stderr, /\bat .*\.[jt]s:\d+/, 'a message, not a stack trace');
  assert.doesNotMatch(run.stdout, /pixiu listening/);
  // The secrets this first start generated were printed above the error: the last line
  // says where they are kept.
  const secretsDir = path.join(dataDir, 'secrets');
  assert.ok(run.stderr.endsWith(`\npixiu: the start failed; the secrets it generated (printed above) are kept in ${path.join(secretsDir, 'api-token')} and ${path.join(secretsDir, 'jwt-secret')}\n`), run.stderr);
});

test('a port in use or a host not of this machine: serve exits 1 naming the address (quoted when blank) and the setting to change, before a new data dir claims partitions in Redis', { timeout: 30_000 }, async (t) => {
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => taken.close(() => resolve())));
  const { port } = taken.address() as AddressInfo;
  const prefix = 'listen-check:';
  for (const [host, listenPort, reason] of [['127.0.0.1', port, /EADDRINUSE/], ['192.0.2.1', 8089, /EADDRNOTAVAIL/], [' ', 8089, /ENOTFOUND|EAI_/]] as const) {
    const run = await runCli(['serve'], {
      PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_HOST: host, PIXIU_PORT: String(listenPort), PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: prefix,
    });
    assert.deepEqual({ code: run.code, signal: run.signal }, { code: 1, signal: null }, run.stderr);
    const shown = host === ' ' ? '" "' : host.replace(/\./g, '\\.');
    assert.match(run.stderr, new RegExp(`cannot listen on ${shown}:${listenPort}: .*`), run.stderr);
    assert.match(run.stderr, reason);
    if (host === '127.0.0.1') assert.match(run.stderr, /\(choose another port with --port or PIXIU_PORT\)/, 'a port in use names the setting');
    else assert.match(run.stderr, /\(PIXIU_HOST or --host must be an address of this machine or a name resolving to one\)/, 'a host not of this machine names the setting (walk38 F6)');
    assert.doesNotMatch(run.stderr, /\bat .*\.[jt]s:\d+/, 'a message, not a stack trace');
  }
  const admin = new Redis(redis.url);
  t.after(() => admin.disconnect());
  assert.deepEqual(await admin.keys(`${prefix}*`), [], 'nothing claimed, nothing written');
});

test('first start generates the API token and JWT secret, keeps them in the data dir and prints them; a second start prints neither and uses both', { timeout: 60_000 }, async (t) => {
  const dataDir = await tempDataDir(t);
  const env = { PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: 'gen:', PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0', PIXIU_LOG_LEVEL: 'info' };

  const first = await spawnServe(env, t);
  const apiToken = printed(first.stderr(), 'API token');
  const jwtSecret = printed(first.stderr(), 'HS256 secret');
  assert.ok(apiToken !== undefined && jwtSecret !== undefined, `both printed:\n${first.stderr()}`);
  assert.equal(first.stderr().split(apiToken.value).length - 1, 1, 'the API token is printed once');
  assert.equal(first.stderr().split(jwtSecret.value).length - 1, 1, 'the JWT secret is printed once');
  assert.notEqual(apiToken.value, jwtSecret.value);
  for (const [secret, name] of [[apiToken, 'api-token'], [jwtSecret, 'jwt-secret']] as const) {
    assert.equal(secret.file, path.join(dataDir, 'secrets', name));
    assert.equal((await readFile(secret.file, 'utf8')).trim(), secret.value, `${name} is what was printed`);
    assert.equal((await stat(secret.file)).mode & 0o777, 0o600, `${name} is readable by its owner only`);
    assert.ok(secret.value.length >= 32, name);
  }
  assert.equal((await stat(path.join(dataDir, 'secrets'))).mode & 0o777, 0o700, 'the secrets folder is its owner\'s only');
  const api1 = new PixiuClient(first.url, apiToken.value);
  const sent = await api1.post('/v1/messages', { to: 'uma', type: 't', data: 1 });
  assert.equal(sent.status, 201, sent.text);
  // Minted during the first run with the printed secret, used against both runs.
  const clientToken = await testToken({ kind: 'secret', secret: jwtSecret.value }, 'uma');
  assert.deepEqual(await welcomeOf(first.url, clientToken), { t: 'welcome', user: 'uma' });
  assert.deepEqual(await first.term(), { code: 0, signal: null }, first.stderr());

  const second = await spawnServe(env, t);
  assert.doesNotMatch(second.stderr(), /generated/, 'nothing is generated again');
  assert.ok(!second.stderr().includes(apiToken.value) && !second.stderr().includes(jwtSecret.value), `neither is printed again:\n${second.stderr()}`);
  assert.ok(!second.stdout().includes(apiToken.value) && !second.stdout().includes(jwtSecret.value), 'nor logged');
  const again = await new PixiuClient(second.url, apiToken.value).post('/v1/messages', { to: 'uma', type: 't', data: 2 });
  assert.equal(again.status, 201, `the first start's API token still works: ${again.text}`);
  assert.deepEqual((again.body as { recipients: unknown }).recipients, [{ user: 'uma', seq: 2 }]);
  expectError(await new PixiuClient(second.url, 'some-other-token-of-enough-length').post('/v1/messages', { to: 'uma', type: 't', data: 3 }), 401, 'UNAUTHORIZED');
  assert.deepEqual(await welcomeOf(second.url, clientToken), { t: 'welcome', user: 'uma' }, "the first start's JWT secret still verifies");
  for (const secret of [apiToken, jwtSecret]) assert.equal((await readFile(secret.file, 'utf8')).trim(), secret.value, 'kept as it was');
  assert.deepEqual(await second.term(), { code: 0, signal: null }, second.stderr());
});

test('PIXIU_JWT_SECRET is the HS256 key as UTF-8 bytes: a token signed over those is accepted, one over latin1 bytes is refused', { timeout: 60_000 }, async () => {
  const secret = SHARED.jwtSecret;
  const utf8 = new TextEncoder().encode(secret);
  const latin1 = new Uint8Array(Buffer.from(secret, 'latin1'));
  assert.notDeepEqual(latin1, utf8, 'the two encodings differ, or the test would prove nothing');
  const serve = await sharedServe();
  const sent = await new PixiuClient(serve.url, SHARED.apiToken).post('/v1/messages', { to: 'zoé', type: 't', data: { n: 1 } });
  assert.equal(sent.status, 201, sent.text);

  /** A token for zoé signed, with jose, over `key`. */
  const sign = (key: Uint8Array): Promise<string> => new SignJWT({})
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setSubject('zoé').setIssuedAt().setExpirationTime('1h').sign(key);
  const asUser = (token: string): PixiuClient => new PixiuClient(serve.url, token);

  const accepted = await asUser(await sign(utf8)).get('/v1/me/messages');
  assert.equal(accepted.status, 200, accepted.text);
  const page = accepted.body as { user: string; messages: Array<{ seq: number; data: unknown }> };
  assert.equal(page.user, 'zoé');
  assert.deepEqual(page.messages.map((m) => [m.seq, m.data]), [[1, { n: 1 }]]);

  expectError(await asUser(await sign(latin1)).get('/v1/me/messages'), 401, 'UNAUTHORIZED', /invalid token/);
});

test('start-up warnings: a PIXIU_ALLOWED_ORIGINS entry that names no web origin or one with a path, a PIXIU_ variable that names no setting, a duration given as a bare number, a body limit not above (here equal to) the message limit', { timeout: 60_000 }, async () => {
  // Its environment: PIXIU_ALLOWED_ORIGINS 'notaurl,https://app.example.com,https://app.example.com/login',
  // PIXIU_PROT 9000, PIXIU_MESSAGE_TTL 86400, PIXIU_HEARTBEAT 25s, PIXIU_MAX_BODY_BYTES and PIXIU_MAX_MESSAGE_BYTES 4096.
  const serve = await sharedServe();
  const lines = serve.stdout().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: number; msg: string; [field: string]: unknown });
  const warned = (words: string): unknown[] => lines.filter((l) => l.level === 40 && l.msg.includes(words));
  assert.deepEqual(warned('PIXIU_ALLOWED_ORIGINS').map((l) => (l as { origins: unknown }).origins), [['notaurl'], ['https://app.example.com/login']], serve.stdout());
  assert.equal(warned('with a path, credentials or a wildcard').length, 1, serve.stdout());
  assert.deepEqual(warned('name no setting').map((l) => (l as { variables: unknown }).variables), [['PIXIU_PROT']], serve.stdout());
  assert.deepEqual(warned('bare number').map((l) => (l as { settings: unknown }).settings), [['PIXIU_MESSAGE_TTL=86400 is 86.4 s']], serve.stdout());
  assert.deepEqual(warned('not above PIXIU_MAX_MESSAGE_BYTES').map((l) => (l as { maxBodyBytes: unknown }).maxBodyBytes), [4096], serve.stdout());
});

test('a start with a configured key and token warns about the generated secrets of an earlier start that they override', { timeout: 60_000 }, async (t) => {
  const dataDir = await tempDataDir(t);
  const env = { PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: 'override:', PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0', PIXIU_LOG_LEVEL: 'info' };
  const warnings = (stdout: string): string[] => stdout.split('\n').filter((l) => l.includes('is not used'))
    .map((l) => (JSON.parse(l) as { file: string }).file);
  // A first start generates both; it has nothing to warn about.
  const first = await spawnServe(env, t);
  assert.deepEqual(warnings(first.stdout()), []);
  assert.deepEqual(await first.term(), { code: 0, signal: null }, first.stderr());
  // Then both are configured: the generated files are left, and named.
  const second = await spawnServe({ ...env, PIXIU_API_TOKEN: 'override-test-api-token-0123456789', PIXIU_JWT_SECRET: 'override-test-jwt-secret-of-32-chars-or-more' }, t);
  assert.deepEqual(warnings(second.stdout()).sort(), [path.join(dataDir, 'secrets', 'api-token'), path.join(dataDir, 'secrets', 'jwt-secret')]);
  assert.deepEqual(await second.term(), { code: 0, signal: null }, second.stderr());
});

test('a crash of serve (a rejection no one handled) is one fatal log line with its stack, and exit 1', { timeout: 60_000 }, async (t) => {
  const preload = fileURLToPath(new URL('../harness/crash-on-signal.mjs', import.meta.url));
  const serve = await spawnServe({
    PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: 'crash:', PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_PORT: '0',
    PIXIU_LOG_LEVEL: 'info', NODE_OPTIONS: `--import ${preload}`,
  }, t);
  serve.proc.kill('SIGUSR2');
  assert.deepEqual(await serve.exited, { code: 1, signal: null }, serve.stderr());
  const fatal = serve.stdout().split('\n').filter((l) => l.includes('"level":60')).map((l) => JSON.parse(l) as { msg: string; origin: string; err: { message: string; stack: string } });
  assert.equal(fatal.length, 1, serve.stdout());
  assert.equal(fatal[0]?.msg, 'pixiu crashed');
  assert.equal(fatal[0]?.origin, 'unhandledRejection');
  assert.match(fatal[0]?.err.stack ?? '', /induced crash[^\n]*\n\s+at /);
});

test('a body far over the limit, or with a wrong token, still shows its 413 or 401 to Node\'s fetch while it uploads (a lingering close, not EPIPE)', { timeout: 60_000 }, async () => {
  const apiToken = SHARED.apiToken;
  // Its body limit is 4096 bytes (PIXIU_MAX_BODY_BYTES).
  const serve = await sharedServe();
  // Far larger than the socket buffers between the two processes: the answer comes
  // while fetch is still writing, and closing at once reset the connection under it.
  const body = `{"messages": [{"to": "ann", "type": "t", "data": "${'x'.repeat(24 * 1024 * 1024)}"}]}`;
  const send = (token: string): Promise<Response> => fetch(`${serve.url}/v1/messages/batch`, {
    method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body,
  });
  const tooLarge = await send(apiToken);
  assert.equal(tooLarge.status, 413);
  assert.equal(((await tooLarge.json()) as { error: { code: string } }).error.code, 'PAYLOAD_TOO_LARGE');
  const refused = await send('not-the-api-token-at-all');
  assert.equal(refused.status, 401);
  assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'UNAUTHORIZED');
  assert.equal((await fetch(`${serve.url}/healthz`)).status, 200);
});
