/**
 * A running node checks the secrets of each node that joins after it
 * (src/cluster/joiner-secrets.ts): before, only the starting node compared, so a node
 * running when another joined with another API token said nothing, and in a rollback
 * (an older node started beside newer ones, which cannot read their salted digests) no
 * newer node ever compared the older one's entry (an upgrade tester's finding). Real
 * services on one real Redis; registrations renew every 5 s, so a join is checked
 * within a renewal or two (three for a node without a store lease, whose URL is waited
 * for). A node that told a difference at its start does not tell it again as a join.
 * The bound on the work per renewal is checked on the check itself, renewal by renewal,
 * against the real Redis; so is the wait for a joiner's shared-settings entry, which it
 * writes after it registers (up to ENTRY_WAIT_RENEWALS renewals).
 */
import { after, before, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { differingSecrets, secretDigests, type NodeSecrets, type OwnSecrets } from '../../src/cluster/secret-digests.js';
import { ENTRY_WAIT_RENEWALS, JoinerSecretCheck, MAX_CHECKS_PER_RENEWAL } from '../../src/cluster/joiner-secrets.js';
import { JOIN_WAIT_RENEWALS, type AddressLookup } from '../../src/cluster/membership-log.js';
import { PartitionClaims } from '../../src/cluster/partition-claims.js';
import { Keys } from '../../src/redis/keys.js';
import { createRedis } from '../../src/redis/client.js';
import { waitUntil } from '../harness/checks.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { cleanupList, startInProcess, tempDataDir } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { oldDigest, secretLines } from './secrets-fixture.js';

const TOKEN = 'secret-joiners-api-token-0123456789';
const OTHER_TOKEN = 'secret-joiners-other-api-token-9876543210';
const JWT = 'secret-joiners-jwt-secret-0123456789abcdef';
/** The debug line of a joiner compared and found to have the same secrets. */
const SAME = 'a joining node\'s secrets are the same as this node\'s';
let server: RedisServer;
before(async () => { server = await RedisServer.start(); });
after(() => server?.destroy());

/** The node id a service's log names at its start (`gateway started`). */
function nodeOf(lines: readonly LogLine[]): string {
  const node = lines.find((l) => l.msg === 'gateway started')?.node;
  assert.equal(typeof node, 'string');
  return node as string;
}

test('a running node logs at error, once, a node joining later with another API token, naming it and its URL; a joiner with the same secrets is not; the node started again (a new id) is checked again', { timeout: 90_000 }, async (t) => {
  const files = cleanupList();
  t.after(() => files.run());
  const settings = { redisUrl: server.url, redisPrefix: 'sj-token:', jwtSecret: JWT, storeDurability: 'relaxed' };
  const a = capturingLogger();
  await startInProcess(files, { ...settings, apiToken: TOKEN }, a.logger);

  const dirB = await tempDataDir(files);
  const b = capturingLogger();
  const serverB = await startInProcess(files, { ...settings, apiToken: OTHER_TOKEN, dataDir: dirB }, b.logger);
  const nodeB = nodeOf(b.lines);
  await waitUntil('A logs that B\'s API token differs', async () => secretLines(a.lines).length > 0, 20_000);
  const [line] = secretLines(a.lines) as [LogLine];
  assert.equal(line.secret, 'PIXIU_API_TOKEN');
  assert.deepEqual([line.nodes, line.urls], [[nodeB], [serverB.service.url]]);
  assert.match(line.msg ?? '', /^the API token \(PIXIU_API_TOKEN\) differs between this node and node \S+ \(\S+\): producers and admin callers get 401/);
  assert.ok((line.msg ?? '').includes(`node ${nodeB} (${serverB.service.url}):`), line.msg);
  for (const secret of [TOKEN, OTHER_TOKEN]) assert.ok(!JSON.stringify(a.lines).includes(secret), 'no secret in A\'s log');

  // C, with A's secrets, joins after B: A compares it (a renewal or more after B) and says nothing at error.
  const c = capturingLogger();
  await startInProcess(files, { ...settings, apiToken: TOKEN }, c.logger);
  const nodeC = nodeOf(c.lines);
  await waitUntil('A compares C', async () => a.lines.some((l) => l.msg === SAME && l.peer === nodeC), 20_000);
  assert.deepEqual(secretLines(a.lines).map((l) => l.nodes), [[nodeB]], 'B told once, over the renewals since; C not at all');
  assert.equal(a.lines.filter((l) => l.level >= 40 && JSON.stringify(l).includes(nodeC)).length, 0);
  // B, running for a renewal or more since its start told A's difference, does not tell it again as a join.
  const nodeA = nodeOf(a.lines);
  assert.equal(secretLines(b.lines).filter((l) => (l.nodes as string[]).includes(nodeA)).length, 1, JSON.stringify(secretLines(b.lines)));

  // B stops and its data dir starts again, still with the other token: a new node id, checked again.
  await serverB.service.close();
  const b2 = capturingLogger();
  const serverB2 = await startInProcess(files, { ...settings, apiToken: OTHER_TOKEN, dataDir: dirB }, b2.logger);
  const nodeB2 = nodeOf(b2.lines);
  assert.notEqual(nodeB2, nodeB);
  await waitUntil('A logs that B again differs', async () => secretLines(a.lines).length > 1, 20_000);
  assert.deepEqual(secretLines(a.lines).map((l) => [l.secret, l.nodes, l.urls]), [
    ['PIXIU_API_TOKEN', [nodeB], [serverB.service.url]],
    ['PIXIU_API_TOKEN', [nodeB2], [serverB2.service.url]],
  ]);
});

test('nodes of an older release joining later (entries without a salt, or without digests) are compared by the running node in their scheme: another token at error, the same secrets not, no digests at info', { timeout: 90_000 }, async (t) => {
  const files = cleanupList();
  t.after(() => files.run());
  const prefix = 'sj-old:';
  const keys = new Keys(prefix);
  const a = capturingLogger();
  await startInProcess(files, { redisUrl: server.url, redisPrefix: prefix, apiToken: TOKEN, jwtSecret: JWT }, a.logger);
  const redis = await createRedis({ url: server.url, commandTimeoutMs: 2000 });
  t.after(() => redis.disconnect());
  // Their entries as 2e0830c writes them: settings, store and `secrets` without salt or build.
  const old = (store: string, secrets?: { apiToken: string; jwtKey: string }): string =>
    JSON.stringify({ inboxCap: 1000, store, ...(secrets === undefined ? {} : { secrets: { apiToken: secrets.apiToken, jwtKind: 'secret', jwtKey: secrets.jwtKey } }) });
  const olds: Record<string, string> = {
    'old-token-2222-bbbbbb': old('store-token', { apiToken: oldDigest(OTHER_TOKEN), jwtKey: oldDigest(JWT) }),
    'old-same-1111-aaaaaa': old('store-same', { apiToken: oldDigest(TOKEN), jwtKey: oldDigest(JWT) }),
    'older-4444-dddddd': old('store-older'),
  };
  const [sec] = await redis.time();
  for (const [node, entry] of Object.entries(olds)) {
    await redis.zadd(keys.nodes(), String((Number(sec) + 60) * 1000), node);
    await redis.hset(keys.nodeSettings(), node, entry);
  }
  // No store lease names them: compared after three renewals without their URL.
  await waitUntil('A compares the three', async () => a.lines.some((l) => l.msg === SAME && l.peer === 'old-same-1111-aaaaaa')
    && secretLines(a.lines).length > 0 && a.lines.some((l) => /not compared/.test(l.msg ?? '')), 40_000);
  assert.deepEqual(secretLines(a.lines).map((l) => [l.secret, l.nodes, l.urls]), [['PIXIU_API_TOKEN', ['old-token-2222-bbbbbb'], [null]]]);
  assert.match(secretLines(a.lines)[0]?.msg ?? '', /^the API token \(PIXIU_API_TOKEN\) differs between this node and node old-token-2222-bbbbbb: producers/);
  const uncompared = a.lines.filter((l) => /not compared/.test(l.msg ?? ''));
  assert.deepEqual(uncompared.map((l) => [l.level, l.nodes]), [[30, ['older-4444-dddddd']]]);
  assert.match(uncompared[0]?.msg ?? '', /^node older-4444-dddddd runs an older release that publishes no digests of its secrets/);
  assert.ok(!JSON.stringify(a.lines.filter((l) => l.level >= 40)).includes('old-same-1111-aaaaaa'));
});

/**
 * The joiner check of node `self` (API token TOKEN, JWT secret JWT) on keys under
 * `prefix` of the file's Redis, its log captured, the joiners' URLs looked up by
 * `addresses` (given the check's Redis and keys).
 */
async function selfCheck(t: TestContext, prefix: string, addresses: (redis: Redis, keys: Keys) => AddressLookup): Promise<{
  redis: Redis; keys: Keys; own: OwnSecrets; lines: LogLine[]; check: JoinerSecretCheck;
}> {
  const keys = new Keys(prefix);
  const redis = await createRedis({ url: server.url, commandTimeoutMs: 2000 });
  t.after(() => redis.disconnect());
  const own: OwnSecrets = { apiToken: TOKEN, jwt: { kind: 'secret', secret: JWT } };
  const secrets: NodeSecrets = {
    digests: await secretDigests(own), differing: (theirs) => differingSecrets(own, theirs), fromDataDir: [], generated: [], dir: '/nowhere',
  };
  const { logger, lines } = capturingLogger();
  const check = new JoinerSecretCheck({ redis, keys, self: 'self', secrets, logger, addresses: addresses(redis, keys) });
  return { redis, keys, own, lines, check };
}

test('the check compares at most a few joiners per renewal, each once by node id; those another comparison read are left out, and a node registered again under its id is not a join', { timeout: 60_000 }, async (t) => {
  const { redis, keys, own, lines, check } = await selfCheck(t, 'sj-bound:', (redis, keys) => () => new PartitionClaims(redis, keys).leasesByNode());
  // Ten joiners with another token, one compared already by the start, and this node itself.
  const joiners = Array.from({ length: 10 }, (_, i) => `joiner-${i}`);
  const other = await secretDigests({ ...own, apiToken: OTHER_TOKEN });
  for (const node of [...joiners, 'at-start']) await redis.hset(keys.nodeSettings(), node, JSON.stringify({ secrets: other }));
  const registered = new Map([...joiners, 'at-start', 'self'].map((n) => [n, 0]));
  await check.observe(registered);
  check.compared(['at-start']);
  check.start();
  const told = (): string[] => secretLines(lines).flatMap((l) => l.nodes as string[]);
  // No lease names them: each is compared once it has been seen for JOIN_WAIT_RENEWALS renewals.
  for (let i = 1; i < JOIN_WAIT_RENEWALS; i++) await check.observe(registered);
  assert.deepEqual(told(), []);
  const perRenewal: number[] = [];
  for (let before = 0; told().length < joiners.length && perRenewal.length < 10; before = told().length) {
    await check.observe(registered);
    perRenewal.push(told().length - before);
  }
  assert.deepEqual(perRenewal, [MAX_CHECKS_PER_RENEWAL, MAX_CHECKS_PER_RENEWAL, joiners.length - 2 * MAX_CHECKS_PER_RENEWAL]);
  assert.deepEqual([...told()].sort(), [...joiners].sort(), 'each once; neither at-start nor self');

  // All gone from the registry for a renewal (Redis lost it), back under their ids: no join.
  await check.observe(new Map([['self', 0]]));
  for (let i = 0; i <= JOIN_WAIT_RENEWALS; i++) await check.observe(registered);
  assert.equal(told().length, joiners.length);
  // A new id (a node started again): checked.
  await redis.hset(keys.nodeSettings(), 'joiner-new', JSON.stringify({ secrets: other }));
  const withNew = new Map([...registered, ['joiner-new', 0]]);
  for (let i = 0; i < JOIN_WAIT_RENEWALS; i++) await check.observe(withNew);
  assert.deepEqual(told().slice(joiners.length), ['joiner-new']);
});

test('a joiner whose shared-settings entry comes renewals after its registration is still compared once it does', { timeout: 30_000 }, async (t) => {
  const { redis, keys, own, lines, check } = await selfCheck(t, 'sj-late:', () => () => Promise.resolve(new Map()));
  await check.observe(new Map([['self', 0]]));
  check.start();
  const registered = new Map([['self', 0], ['late', 0]]);
  // Registered, its entry not written yet: past the wait for its URL, within the wait for its entry.
  const renewals = JOIN_WAIT_RENEWALS + 1;
  assert.ok(renewals < ENTRY_WAIT_RENEWALS);
  for (let i = 0; i < renewals; i++) await check.observe(registered);
  const told = (): string[] => secretLines(lines).flatMap((l) => l.nodes as string[]);
  assert.deepEqual(told(), []);
  await redis.hset(keys.nodeSettings(), 'late', JSON.stringify({ secrets: await secretDigests({ ...own, apiToken: OTHER_TOKEN }) }));
  await check.observe(registered);
  assert.deepEqual(told(), ['late'], 'its other API token is told once its entry is there');
});
