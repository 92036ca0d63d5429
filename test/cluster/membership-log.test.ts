/**
 * Each node logs the cluster's membership as its node registry sees it
 * (src/cluster/membership-log.ts): `node joined the cluster` when another node
 * registers, with its store and advertised URL from its lease, and `node left the
 * cluster` when it is gone — each once. (An ops finding: no node logged another's
 * joining or leaving.) Two services in this process on one Redis; A's log is captured.
 * A node starting names those already there in one line. Registrations renew every 5 s, so each line comes within a renewal or two.
 * Each line names the node's build, `version` and `commit` (an upgrade tester's finding:
 * nothing said which release each node ran), both null for a node of a release whose
 * node-settings entry names none. The join line waits for the joiner's URL (its lease,
 * taken after it registers) for up to JOIN_WAIT_RENEWALS renewals, and no longer than
 * until it is found: the MembershipLog itself, with its lookups played by the test.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { RedisServer } from '../harness/redis-server.js';
import { startInProcess, tempDataDir } from '../harness/pixiu-server.js';
import { JWT_SECRET } from '../gateway/gateway-fixture.js';
import { openInbox } from '../harness/checks.js';
import { Keys } from '../../src/redis/keys.js';
import { buildInfo } from '../../src/version.js';
import { JOIN_WAIT_RENEWALS, MembershipLog, type NodeAddress } from '../../src/cluster/membership-log.js';

test('a node logs another joining, with its store and URL, and leaving (stopped), once each', { timeout: 60_000 }, async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const settings = { redisUrl: redis.url, redisPrefix: 'members:', jwtSecret: JWT_SECRET, storeDurability: 'relaxed' };
  const { logger, lines } = capturingLogger();
  const a = await startInProcess(t, { ...settings, dataDir: await tempDataDir(t) }, logger);
  assert.deepEqual(lines.filter((l) => l.msg === 'other nodes in the cluster at start'), [], 'alone at its start: no such line');

  const dirB = await tempDataDir(t);
  const b = await startInProcess(t, { ...settings, dataDir: dirB });
  const { storeId } = JSON.parse(await readFile(path.join(dirB, 'xiu', 'LAYOUT'), 'utf8')) as { storeId: string };
  await waitUntil('A logs B joining', async () => lines.some((l) => l.msg === 'node joined the cluster'), 20_000);
  const joined = lines.find((l) => l.msg === 'node joined the cluster');
  assert.equal(joined?.level, 30, 'info');
  assert.equal(joined?.url, b.service.url, JSON.stringify(joined));
  assert.equal(joined?.store, storeId);
  assert.equal(typeof joined?.peer, 'string');
  const { version, commit } = buildInfo();
  assert.deepEqual([joined?.version, joined?.commit], [version, commit], 'the build B runs');

  await b.service.close();
  await waitUntil('A logs B leaving', async () => lines.some((l) => l.msg === 'node left the cluster'), 20_000);
  const left = lines.filter((l) => l.msg === 'node left the cluster');
  assert.deepEqual(left.map((l) => [l.level, l.peer, l.url, l.store, l.commit]), [[30, joined?.peer, b.service.url, storeId, commit]]);
  assert.match(String(left[0]?.reason), /^stopped/);
  assert.equal(lines.filter((l) => l.msg === 'node joined the cluster').length, 1, 'the join logged once, over several renewals');

  // A node of an older release: registered, its entry as 2e0830c writes it (no build).
  const { redis: raw } = await openInbox(t, redis.url, settings.redisPrefix);
  const keys = new Keys(settings.redisPrefix);
  await raw.zadd(keys.nodes(), String(Date.now() + 60_000), 'old-host-4242-abcdef');
  await raw.hset(keys.nodeSettings(), 'old-host-4242-abcdef', JSON.stringify({ inboxCap: 1000, store: 'store-of-an-old-node' }));

  // A node starting beside them names them once, in one line, rather than as a join.
  const c = capturingLogger();
  await startInProcess(t, { ...settings, dataDir: await tempDataDir(t) }, c.logger);
  const atStart = c.lines.filter((l) => l.msg === 'other nodes in the cluster at start');
  assert.equal(atStart.length, 1, JSON.stringify(c.lines.filter((l) => l.level >= 30)));
  const nodes = (atStart[0]?.nodes as { node: string; url?: string; version?: string | null; commit?: string | null }[]);
  assert.equal(nodes.length, 2, JSON.stringify(nodes));
  const [atA, atOld] = [nodes.find((n) => n.url === a.service.url), nodes.find((n) => n.node === 'old-host-4242-abcdef')];
  assert.deepEqual([atA?.version, atA?.commit], [version, commit], JSON.stringify(nodes));
  assert.deepEqual([atOld?.url, atOld?.version, atOld?.commit], [undefined, null, null], JSON.stringify(nodes));
  assert.deepEqual(c.lines.filter((l) => l.msg === 'node joined the cluster'), []);
});

test('a joining node is logged at the first renewal that finds its URL; one whose URL is never found, at the JOIN_WAIT_RENEWALS-th', async () => {
  const { logger, lines } = capturingLogger();
  const addresses = new Map<string, NodeAddress>();
  const log = new MembershipLog(logger, 'self', () => Promise.resolve(addresses));
  const joinedPeers = (): unknown[] => lines.filter((l) => l.msg === 'node joined the cluster').map((l) => [l.peer, l.url]);
  const expiry = Date.now() + 15_000;
  await log.observe(new Map([['self', expiry]]), Date.now());
  // Both register; neither has its lease yet.
  const both = new Map([['self', expiry], ['with-url', expiry], ['no-url', expiry]]);
  await log.observe(both, Date.now());
  assert.deepEqual(joinedPeers(), []);
  addresses.set('with-url', { storeId: 'store-1', url: 'http://10.0.0.2:8080' });
  await log.observe(both, Date.now());
  assert.deepEqual(joinedPeers(), [['with-url', 'http://10.0.0.2:8080']], 'logged at the renewal that found its URL');
  // The renewals seen since they registered: 2 so far; the one without a URL is logged at the last.
  for (let seen = 3; seen < JOIN_WAIT_RENEWALS; seen++) await log.observe(both, Date.now());
  assert.deepEqual(joinedPeers(), [['with-url', 'http://10.0.0.2:8080']]);
  await log.observe(both, Date.now());
  assert.deepEqual(joinedPeers(), [['with-url', 'http://10.0.0.2:8080'], ['no-url', undefined]], 'the other, without its URL, after the wait');
});

test('the lines keep what earlier renewals learnt: a leaving node\'s URL and build though the lookups fail later, its expiry as last renewed, a URL found after its join; a node gone before its URL was seen logs its join with its leaving, once', async () => {
  const { logger, lines } = capturingLogger();
  const addresses = new Map<string, NodeAddress>();
  let builds = new Map<string, { version: string; commit: string } | null>();
  let failing = false;
  const fail = (): Promise<never> => Promise.reject(new Error('redis down'));
  const log = new MembershipLog(logger, 'self',
    () => (failing ? fail() : Promise.resolve(addresses)),
    () => (failing ? fail() : Promise.resolve(builds)));
  const of = (msg: string): unknown[] => lines.filter((l) => l.msg === msg).map((l) => [l.peer, l.url, l.version, String(l.reason).split(' ')[0]]);
  const t0 = 1_000_000;
  const observe = (nowMs: number, ...nodes: Array<[string, number]>): Promise<void> => log.observe(new Map([['self', t0 + 60_000], ...nodes]), nowMs);
  await observe(t0);

  // x: its URL found at once, its build never (no entry read: looked up at every renewal).
  // y: never a URL while it waits, its build named by the first read only.
  addresses.set('x', { storeId: 's-x', url: 'http://x:8080' });
  builds = new Map([['y', { version: '1.2.3', commit: 'abc' }]]);
  await observe(t0, ['x', t0 + 1000], ['y', t0 + 1000]);
  builds = new Map();
  failing = true; // Redis answers the renewals but not the lookups: the lines go with what was learnt
  // Renewed since: x's registration now runs to t0 + 30 s.
  await observe(t0 + 10_000, ['x', t0 + 30_000], ['y', t0 + 30_000]);
  await observe(t0 + 11_000, ['x', t0 + 30_000], ['y', t0 + 30_000]);
  assert.deepEqual(of('node joined the cluster'), [['x', 'http://x:8080', undefined, 'undefined'], ['y', undefined, '1.2.3', 'undefined']],
    'y after JOIN_WAIT_RENEWALS renewals though its URL was never read (before: never, while the lookup failed), with the build read once');
  // x stops (deregisters) before its registration's end as last renewed.
  await observe(t0 + 12_000, ['y', t0 + 30_000]);
  await observe(t0 + 13_000, ['y', t0 + 30_000]);
  assert.deepEqual(of('node left the cluster'), [['x', 'http://x:8080', undefined, 'stopped']],
    'once; its URL as learnt (before: none once a lookup failed), stopped by its expiry as renewed (before: lapsed, by its first)');

  // y's lease is read at last, after its join: its leaving names its URL.
  failing = false;
  addresses.set('y', { storeId: 's-y', url: 'http://y:8080' });
  await observe(t0 + 14_000, ['y', t0 + 30_000], ['z', t0 + 20_000]); // and z registers
  await observe(t0 + 25_000); // y stops, z lapsed before any lease of it was seen
  await observe(t0 + 26_000);
  assert.deepEqual(of('node left the cluster').slice(1), [['y', 'http://y:8080', '1.2.3', 'stopped'], ['z', undefined, undefined, 'registration']],
    'before: y without the URL found after its join; each once');
  assert.deepEqual(of('node joined the cluster').at(-1), ['z', undefined, undefined, 'undefined'], 'z\'s join logged with its leaving (before: never)');
});

test('the nodes there at start are named in one line, and not logged as joining at the renewals after', async () => {
  const { logger, lines } = capturingLogger();
  const log = new MembershipLog(logger, 'self', () => Promise.resolve(new Map([['x', { storeId: 's-x', url: 'http://x:8080' }]])));
  const registered = new Map([['self', Date.now() + 15_000], ['x', Date.now() + 15_000], ['y', Date.now() + 15_000]]);
  for (let i = 0; i < JOIN_WAIT_RENEWALS + 1; i++) await log.observe(registered, Date.now());
  const atStart = lines.filter((l) => l.msg === 'other nodes in the cluster at start');
  assert.deepEqual(atStart.map((l) => l.nodes), [[{ node: 'x', store: 's-x', url: 'http://x:8080' }, { node: 'y' }]]);
  assert.deepEqual(lines.filter((l) => l.msg === 'node joined the cluster'), [], 'before: each logged again as a join');
});
