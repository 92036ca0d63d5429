/**
 * What `pixiu serve` warns about once at start in the key source of client tokens; it
 * starts all the same.
 *
 * A `PIXIU_JWKS_URL` that is plain `http://` to a host other than this machine's
 * loopback (src/auth/jwks-fetch.ts CLEARTEXT_JWKS_LOG): anyone on the path can serve
 * their own keys and mint tokens, and credentials in the URL travel in clear. Before,
 * such a URL was taken without a word (a black-box security tester's finding, walk22
 * F2). A loopback URL stays quiet; the warning shows neither the URL's credentials nor
 * its query.
 *
 * An identity provider's keys (`PIXIU_JWT_PUBLIC_KEY`, `PIXIU_JWKS_URL`) without
 * `PIXIU_JWT_AUDIENCE` (src/auth/unchecked-audience.ts UNCHECKED_AUDIENCE_LOG): `aud`
 * is not checked, so a token the same provider issued for another application logs in
 * as its `sub`. Before, such a node started without a word (secaudit F3). With an
 * audience set, or with an HS256 secret, the start is quiet.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { CLEARTEXT_JWKS_LOG, cleartextJwksUrl } from '../../src/auth/jwks-fetch.js';
import { UNCHECKED_AUDIENCE_LOG } from '../../src/auth/unchecked-audience.js';
import { RedisServer } from '../harness/redis-server.js';
import { logLines, type LogLine } from '../harness/log-capture.js';
import { cleanupList, runEach, spawnServe, tempDataDir } from '../harness/pixiu-server.js';

let redis: RedisServer;
const files = cleanupList();

before(async () => {
  redis = await RedisServer.start();
});

after(async () => {
  await files.run();
  await redis?.destroy();
});

/** The warn lines (level 40) of a serve's stdout whose `msg` is `msg`. */
function warnings(stdout: string, msg: string): LogLine[] {
  return logLines(stdout, msg).filter((l) => l.level === 40);
}

/** The warn lines of {@link CLEARTEXT_JWKS_LOG}. */
function cleartextWarnings(stdout: string): LogLine[] {
  return warnings(stdout, CLEARTEXT_JWKS_LOG);
}

/** Starts serve with `keys` (the key source and audience settings), stops it, and answers its stdout. */
async function startWith(keys: Record<string, string>, prefix: string): Promise<string> {
  const serve = await spawnServe({
    PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: prefix, PIXIU_DATA_DIR: await tempDataDir(files), PIXIU_PORT: '0',
    PIXIU_LOG_LEVEL: 'info', ...keys,
  }, files);
  assert.deepEqual(await serve.term(), { code: 0, signal: null }, serve.stderr());
  return serve.stdout();
}

/** Starts serve on `jwksUrl`, stops it, and answers its stdout. */
function startOn(jwksUrl: string, prefix: string): Promise<string> {
  return startWith({ PIXIU_JWKS_URL: jwksUrl }, prefix);
}

test('serve warns once about a plain http:// JWKS URL to another host, naming the risk, without the URL\'s credentials or query; a loopback one is quiet', { timeout: 60_000 }, async () => {
  // .invalid never resolves (RFC 6761 §6.4): the fetch fails at once, the start goes on.
  const remote = await startOn('http://jwksuser:jwkspass@jwks.invalid/keys?secret=qs123', 'remote:');
  const warned = cleartextWarnings(remote);
  assert.equal(warned.length, 1, remote);
  assert.equal(warned[0]?.url, 'http://jwks.invalid/keys?…');
  assert.match(CLEARTEXT_JWKS_LOG, /mint tokens/);
  assert.match(CLEARTEXT_JWKS_LOG, /credentials in the URL travel in clear/);
  assert.ok(!remote.includes('jwkspass') && !remote.includes('qs123'), remote);

  const loopback = await startOn('http://127.0.0.1:9/keys', 'loopback:');
  assert.deepEqual(cleartextWarnings(loopback), [], loopback);
});

test('which JWKS URLs are fetched in clear from another machine: http:// to any host but localhost, 127.0.0.0/8 and ::1', () => {
  for (const url of ['http://192.0.2.1/jwks', 'http://idp.internal:8080/jwks', 'http://[fd00::2]/jwks', 'http://localhost.example/jwks', 'HTTP://10.0.0.1/']) {
    assert.equal(cleartextJwksUrl(url), true, url);
  }
  for (const url of ['https://192.0.2.1/jwks', 'http://localhost/jwks', 'http://LOCALHOST:8080/', 'http://127.0.0.1/', 'http://127.5.6.7:1/',
    'http://127.1/', 'http://[::1]:8080/', 'http://[::ffff:127.0.0.1]/']) {
    assert.equal(cleartextJwksUrl(url), false, url);
  }
});

test('serve warns once when a public key or JWKS verifies client tokens without PIXIU_JWT_AUDIENCE, naming the setting; with an audience, or an HS256 secret, it is quiet', { timeout: 120_000 }, async () => {
  const pem = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
  const cases: ReadonlyArray<readonly [string, Record<string, string>, string | undefined]> = [
    ['public-key', { PIXIU_JWT_PUBLIC_KEY: pem }, 'PIXIU_JWT_PUBLIC_KEY'],
    // .invalid never resolves (RFC 6761 §6.4): the fetch fails at once, the start goes on.
    ['jwks', { PIXIU_JWKS_URL: 'https://jwks.invalid/keys' }, 'PIXIU_JWKS_URL'],
    ['public-key-aud', { PIXIU_JWT_PUBLIC_KEY: pem, PIXIU_JWT_AUDIENCE: 'https://pixiu.example.com' }, undefined],
    ['secret', { PIXIU_JWT_SECRET: randomBytes(32).toString('hex') }, undefined],
  ];
  for (const [[name, , source], stdout] of await runEach(cases, ([name, keys]) => startWith(keys, `${name}:`), 2)) {
    const warned = warnings(stdout, UNCHECKED_AUDIENCE_LOG);
    if (source === undefined) {
      assert.deepEqual(warned, [], `${name}: ${stdout}`);
    } else {
      assert.equal(warned.length, 1, `${name}: ${stdout}`);
      assert.equal(warned[0]?.keySource, source, name);
    }
  }
  assert.match(UNCHECKED_AUDIENCE_LOG, /another application/);
  assert.match(UNCHECKED_AUDIENCE_LOG, /set PIXIU_JWT_AUDIENCE/);
});
