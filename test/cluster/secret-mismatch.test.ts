/**
 * Nodes sharing a Redis must share PIXIU_API_TOKEN and the client-token key
 * (src/cluster/secret-digests.ts): a node started without them generated its own and
 * joined silently, and producers got 401 from it with nothing logged (a black-box
 * SRE's finding). Each node now publishes one-way digests of both with its shared
 * settings, and a starting node logs at error each that a live node has otherwise.
 * Two real services on one real Redis. The digests are scrypt under each node's own
 * salt (a reviewer's finding: an HMAC over a fixed label let one dictionary of weak
 * tokens serve against every deployment's Redis).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createHmac, generateKeyPairSync } from 'node:crypto';
import { differingSecrets, peerDigests, readDigests, secretDigest, secretDigests, type OwnSecrets, type SecretDigests } from '../../src/cluster/secret-digests.js';
import { Keys } from '../../src/redis/keys.js';
import { createRedis } from '../../src/redis/client.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { cleanupList, startInProcess } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { oldDigest, secretLines } from './secrets-fixture.js';

const TOKEN = 'secret-mismatch-api-token-0123456789';
const JWT = 'secret-mismatch-jwt-secret-0123456789abcdef';
let server: RedisServer;
before(async () => { server = await RedisServer.start(); });
after(() => server?.destroy());

test('a node started without PIXIU_API_TOKEN beside one with it logs at error that the API token differs, that it generated its own, and that producers get 401; the digests in Redis are not the secrets', async (t) => {
  const files = cleanupList();
  t.after(() => files.run());
  const prefix = 'sm-token:';
  const a = await startInProcess(files, { redisUrl: server.url, redisPrefix: prefix, apiToken: TOKEN, jwtSecret: JWT });
  const { logger, lines } = capturingLogger();
  const b = await startInProcess(files, { redisUrl: server.url, redisPrefix: prefix, jwtSecret: JWT }, logger);
  const found = secretLines(lines);
  assert.equal(found.length, 1, JSON.stringify(found));
  const [line] = found as [LogLine];
  assert.equal(line.secret, 'PIXIU_API_TOKEN');
  const msg = line.msg ?? '';
  assert.match(msg, /^the API token \(PIXIU_API_TOKEN\) differs between this node and node \S+ \(\S+\): producers and admin callers get 401/);
  // The other node by id and by the URL it advertises (its store lease), in the text and in `urls`.
  assert.ok(msg.includes(`(${a.service.url}):`), msg);
  assert.deepEqual(line.urls, [a.service.url]);
  assert.match(msg, /This node generated its own now \(.*secrets\/api-token\) because PIXIU_API_TOKEN is not set/);
  assert.match(msg, /during a rolling change of it this is expected until the last node has the new one/);
  assert.ok(!msg.includes(TOKEN) && !msg.includes(b.service.secrets.apiToken));
  // What Redis holds: digests, never a secret.
  const redis = await createRedis({ url: server.url, commandTimeoutMs: 2000 });
  t.after(() => redis.disconnect());
  const entries = Object.values(await redis.hgetall(new Keys(prefix).nodeSettings())).join('\n');
  for (const secret of [TOKEN, JWT, b.service.secrets.apiToken]) assert.ok(!entries.includes(secret));
  const digests = readNodeDigests(Object.values(await redis.hgetall(new Keys(prefix).nodeSettings())));
  assert.equal(digests.length, 2);
  const own = await Promise.all(digests.map((d) => secretDigest(TOKEN, d.salt)));
  assert.equal(digests.filter((d, i) => d.apiToken === own[i]).length, 1, 'A\'s entry holds the digest of its token under its salt, B\'s not');
});

test('beside nodes of an older release (entries as 2e0830c writes them: unsalted digests, or none), a node compares in their scheme: the same secrets say nothing, another token or JWT secret is told at error; an entry without digests is said at info not compared', { timeout: 60_000 }, async (t) => {
  const files = cleanupList();
  t.after(() => files.run());
  const prefix = 'sm-old:';
  const keys = new Keys(prefix);
  const x = await startInProcess(files, { redisUrl: server.url, redisPrefix: prefix, apiToken: TOKEN, jwtSecret: JWT });
  const redis = await createRedis({ url: server.url, commandTimeoutMs: 2000 });
  t.after(() => redis.disconnect());
  // The older nodes' entries: X's settings, as 2e0830c's compareNodeEntries writes them
  // (`{...settings, store, secrets: {apiToken, jwtKind, jwtKey}}`, no salt, no build).
  const [xEntry] = Object.values(await redis.hgetall(keys.nodeSettings()));
  const { secrets: _salted, build: _build, store: _store, ...settings } = JSON.parse(xEntry ?? '{}') as Record<string, unknown>;
  const old = (store: string, secrets?: { apiToken: string; jwtKey: string }): string =>
    JSON.stringify({ ...settings, store, ...(secrets === undefined ? {} : { secrets: { apiToken: secrets.apiToken, jwtKind: 'secret', jwtKey: secrets.jwtKey } }) });
  const olds: Record<string, string> = {
    'old-same-1111-aaaaaa': old('store-same', { apiToken: oldDigest(TOKEN), jwtKey: oldDigest(JWT) }),
    'old-token-2222-bbbbbb': old('store-token', { apiToken: oldDigest('a-really-different-api-token-999'), jwtKey: oldDigest(JWT) }),
    'old-jwt-3333-cccccc': old('store-jwt', { apiToken: oldDigest(TOKEN), jwtKey: oldDigest(`${JWT}-other`) }),
    'older-4444-dddddd': old('store-older'),
  };
  const [sec] = await redis.time();
  for (const [node, entry] of Object.entries(olds)) {
    await redis.zadd(keys.nodes(), String((Number(sec) + 60) * 1000), node);
    await redis.hset(keys.nodeSettings(), node, entry);
  }

  const { logger, lines } = capturingLogger();
  await startInProcess(files, { redisUrl: server.url, redisPrefix: prefix, apiToken: TOKEN, jwtSecret: JWT }, logger);
  const errors = secretLines(lines);
  assert.deepEqual(errors.map((l) => [l.secret, l.nodes]).sort(), [
    ['PIXIU_API_TOKEN', ['old-token-2222-bbbbbb']],
    ['client-token key', ['old-jwt-3333-cccccc']],
  ], JSON.stringify(errors));
  assert.match(errors.find((l) => l.secret === 'PIXIU_API_TOKEN')?.msg ?? '', /^the API token \(PIXIU_API_TOKEN\) differs between this node and node old-token-2222-bbbbbb: producers and admin callers get 401/);
  const uncompared = lines.filter((l) => /not compared/.test(l.msg ?? ''));
  const warned = lines.filter((l) => l.level >= 40 || uncompared.includes(l));
  assert.ok(!JSON.stringify(warned).includes('old-same-1111-aaaaaa'), 'the same secrets under the old scheme: nothing said');
  assert.deepEqual(uncompared.map((l) => [l.level, l.nodes]), [[30, ['older-4444-dddddd']]], JSON.stringify(uncompared));
  assert.match(uncompared[0]?.msg ?? '', /^node older-4444-dddddd runs an older release that publishes no digests of its secrets: its PIXIU_API_TOKEN and client-token key are not compared with this node's/);
  // Its own entry holds no unsalted digest: the first scheme is read, never written.
  const written = Object.values(await redis.hgetall(keys.nodeSettings())).filter((e) => e.includes('"salt"')).join('\n');
  assert.ok(!written.includes(oldDigest(TOKEN)) && !written.includes(oldDigest(JWT)));
});

test('beside a node of a release without digests, and none whose secrets differ, a starting node still says at info that node\'s secrets are not compared', { timeout: 60_000 }, async (t) => {
  const files = cleanupList();
  t.after(() => files.run());
  const prefix = 'sm-older-only:';
  const keys = new Keys(prefix);
  const redis = await createRedis({ url: server.url, commandTimeoutMs: 2000 });
  t.after(() => redis.disconnect());
  const [sec] = await redis.time();
  await redis.zadd(keys.nodes(), String((Number(sec) + 60) * 1000), 'older-5555-eeeeee');
  await redis.hset(keys.nodeSettings(), 'older-5555-eeeeee', JSON.stringify({ inboxCap: 10_000, store: 'store-older-only' }));
  const { logger, lines } = capturingLogger();
  await startInProcess(files, { redisUrl: server.url, redisPrefix: prefix, apiToken: TOKEN, jwtSecret: JWT }, logger);
  assert.deepEqual(secretLines(lines), []);
  const uncompared = lines.filter((l) => /not compared/.test(l.msg ?? ''));
  assert.deepEqual(uncompared.map((l) => [l.level, l.nodes]), [[30, ['older-5555-eeeeee']]], 'before: said only when some other node\'s secret differed');
});

/** The entries' digests, parsed. */
function readNodeDigests(entries: readonly string[]): SecretDigests[] {
  return entries.map((e) => readDigests(JSON.parse(e) as Record<string, unknown>)).filter((d): d is SecretDigests => d !== undefined);
}

test('nodes with the same secrets log no secret mismatch; another JWT secret is told as the client-token key', async (t) => {
  const files = cleanupList();
  t.after(() => files.run());
  const same = 'sm-same:';
  await startInProcess(files, { redisUrl: server.url, redisPrefix: same, apiToken: TOKEN, jwtSecret: JWT });
  const equal = capturingLogger();
  await startInProcess(files, { redisUrl: server.url, redisPrefix: same, apiToken: TOKEN, jwtSecret: JWT }, equal.logger);
  assert.deepEqual(secretLines(equal.lines), []);
  assert.ok(equal.lines.some((l) => l.msg === 'pixiu listening'));

  const other = 'sm-jwt:';
  await startInProcess(files, { redisUrl: server.url, redisPrefix: other, apiToken: TOKEN, jwtSecret: JWT });
  const differ = capturingLogger();
  await startInProcess(files, { redisUrl: server.url, redisPrefix: other, apiToken: TOKEN, jwtSecret: `${JWT}-rotated` }, differ.logger);
  const found = secretLines(differ.lines);
  assert.equal(found.length, 1, JSON.stringify(found));
  assert.equal(found[0]?.secret, 'client-token key');
  assert.match(found[0]?.msg ?? '', /^the client-token key differs between this node and node \S+ \(http:\/\/\S+\): clients get 401 \(their token refused\) from the nodes whose key did not sign it\. Give every node the same client-token key \(PIXIU_JWT_SECRET\)/);
});

test('digests: one public key in two PEM texts compares equal; a JWKS URL is compared by kind only; a key kind that differs is told, from either side; an entry with a malformed salt is not compared', async () => {
  const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const pem = publicKey.export({ type: 'spki', format: 'pem' }) as string;
  const spki: OwnSecrets = { apiToken: TOKEN, jwt: { kind: 'public-key', pem } };
  const escaped: OwnSecrets = { apiToken: TOKEN, jwt: { kind: 'public-key', pem: `\n${pem.trim()}\n\n` } };
  assert.deepEqual(await differingSecrets(spki, await secretDigests(escaped)), []);
  const jwksA: OwnSecrets = { apiToken: TOKEN, jwt: { kind: 'jwks', url: 'https://idp.internal/jwks' } };
  const jwksB: OwnSecrets = { apiToken: TOKEN, jwt: { kind: 'jwks', url: 'https://idp.example.com/jwks' } };
  assert.deepEqual(await differingSecrets(jwksA, await secretDigests(jwksB)), []);
  assert.deepEqual(await differingSecrets(spki, await secretDigests(jwksA)), ['client-token key']);
  // And the other way: a node on a JWKS beside one with a key (which it cannot digest).
  assert.deepEqual(await differingSecrets(jwksA, await secretDigests(spki)), ['client-token key']);
  const salt = '00'.repeat(16);
  assert.equal((await secretDigest(TOKEN, salt)).length, 16);
  // An entry whose salt is no 16 bytes in hex holds no digests to compare: not compared
  // (said at info), rather than a false difference at error from digests made with a bad salt.
  const digests = await secretDigests(spki);
  assert.deepEqual(peerDigests({ secrets: digests }), digests);
  for (const bad of ['zz'.repeat(16), '00'.repeat(15), `${'00'.repeat(16)}00`]) assert.equal(peerDigests({ secrets: { ...digests, salt: bad } }), undefined, bad);
  assert.notEqual(await secretDigest(TOKEN, salt), await secretDigest(`${TOKEN}x`, salt));
});

test('digests: two nodes with one token and one JWT secret publish different salts and different digests, yet compare equal; neither holds an unsalted digest of the token', async () => {
  const secrets: OwnSecrets = { apiToken: TOKEN, jwt: { kind: 'secret', secret: JWT } };
  const [a, b] = await Promise.all([secretDigests(secrets), secretDigests(secrets)]);
  assert.match(a.salt, /^[0-9a-f]{32}$/);
  assert.notEqual(a.salt, b.salt);
  assert.notEqual(a.apiToken, b.apiToken);
  assert.notEqual(a.jwtKey, b.jwtKey);
  assert.deepEqual(await differingSecrets(secrets, a), []);
  assert.deepEqual(await differingSecrets(secrets, b), []);
  assert.deepEqual(await differingSecrets({ ...secrets, apiToken: `${TOKEN}x` }, a), ['PIXIU_API_TOKEN']);
  assert.deepEqual(await differingSecrets({ ...secrets, jwt: { kind: 'secret', secret: `${JWT}x` } }, b), ['client-token key']);
  // Not there: what one precomputed dictionary could match in every deployment.
  const entry = JSON.stringify({ secrets: a }) + JSON.stringify({ secrets: b });
  for (const secret of [TOKEN, JWT]) {
    for (const label of ['pixiu node-settings secret digest v1', 'pixiu node-settings secret digest v2']) {
      const hmac = createHmac('sha256', secret).update(label).digest('hex');
      assert.ok(!entry.includes(hmac.slice(0, 16)), `HMAC under ${label}`);
    }
    const sha = createHash('sha256').update(secret).digest('hex');
    assert.ok(!entry.includes(sha.slice(0, 16)) && !entry.includes(secret));
  }
  // An entry of the first scheme (no salt) is not compared.
  assert.equal(readDigests({ secrets: { apiToken: a.apiToken, jwtKind: 'secret', jwtKey: a.jwtKey } }), undefined);
});

test('digests: a salt and secret asked for again in one process, or while the first is computed, are not computed again; another secret or salt is', async () => {
  const salt = 'c0ffee'.padEnd(32, '0');
  const first = secretDigest(TOKEN, salt);
  assert.equal(secretDigest(TOKEN, salt), first, 'asked while it is computed: the same computation');
  const digest = await first;
  assert.match(digest, /^[0-9a-f]{16}$/);
  assert.equal(secretDigest(TOKEN, salt), first, 'asked again: the answer kept');
  const [otherSecret, otherSalt] = [secretDigest(`${TOKEN}x`, salt), secretDigest(TOKEN, 'c0ffee'.padEnd(32, '1'))];
  assert.notEqual(otherSecret, first);
  assert.notEqual(otherSalt, first);
  assert.notEqual(await otherSecret, digest);
  assert.notEqual(await otherSalt, digest);
});
