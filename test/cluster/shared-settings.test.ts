/**
 * Settings that act on state all nodes share in Redis (src/cluster/shared-settings.ts):
 * a node that starts with another value than a live node's is warned, naming both; a
 * node no longer registered is not compared, and its entry is removed. Against a real
 * Redis, with real node registries.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import { pino } from 'pino';
import { ClusterSecret } from '../../src/cluster/cluster-secret.js';
import { NodeRegistry } from '../../src/cluster/node-registry.js';
import { announceSharedSettings, compareNodeEntries, publishSharedSettings } from '../../src/cluster/shared-settings.js';
import { loadConfig, type ConfigOverrides } from '../../src/config/config.js';
import { createLogger, type Logger } from '../../src/logger.js';
import { createRedis } from '../../src/redis/client.js';
import { Keys } from '../../src/redis/keys.js';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList, spawnServe, startInProcess, tempDataDir } from '../harness/pixiu-server.js';
import { capturingLogger } from '../harness/log-capture.js';
import { startService } from '../../src/service/service.js';
import { flushPrefix, waitUntil } from '../harness/checks.js';

const keys = new Keys('px:');
let server: RedisServer;
let redis: Redis;
const registries: NodeRegistry[] = [];

before(async () => {
  server = await RedisServer.start();
  redis = await createRedis({ url: server.url, commandTimeoutMs: 2000 });
});

after(async () => {
  await Promise.all(registries.map((r) => r.stop()));
  redis?.disconnect();
  await server?.destroy();
});

/** A registered node. */
async function node(id: string): Promise<NodeRegistry> {
  const registry = new NodeRegistry(redis, keys, { node: id, intervalMs: 5000, ttlMs: 15_000, logger: createLogger('silent') });
  registries.push(registry);
  await registry.start();
  return registry;
}

const config = (overrides: ConfigOverrides = {}): ReturnType<typeof loadConfig> => loadConfig({}, { redisUrl: server.url, ...overrides });

test('a node with another inbox cap or channel history than a live node is told each, with the nodes that have the other value', async () => {
  const [a, b, c] = [await node('node-a'), await node('node-b'), await node('node-c')];
  assert.deepEqual(await publishSharedSettings(redis, keys, a, config()), []);
  assert.deepEqual(await publishSharedSettings(redis, keys, b, config({ inboxCap: '5', channelHistory: '10' })), [
    { setting: 'inboxCap', env: 'PIXIU_INBOX_CAP', here: 5, there: 10_000, nodes: ['node-a'] },
    { setting: 'channelHistory', env: 'PIXIU_CHANNEL_HISTORY', here: 10, there: 100, nodes: ['node-a'] },
  ]);
  // A third node with the defaults is told of the one node that differs, not of the one that agrees.
  assert.deepEqual(await publishSharedSettings(redis, keys, c, config()), [
    { setting: 'inboxCap', env: 'PIXIU_INBOX_CAP', here: 10_000, there: 5, nodes: ['node-b'] },
    { setting: 'channelHistory', env: 'PIXIU_CHANNEL_HISTORY', here: 100, there: 10, nodes: ['node-b'] },
  ]);
  // Gone (unregistered): a node starting now does not compare it, and removes its entry.
  await b.stop();
  const f = await node('node-f');
  assert.deepEqual(await publishSharedSettings(redis, keys, f, config()), []);
  assert.deepEqual(Object.keys(await redis.hgetall(keys.nodeSettings())).sort(), ['node-a', 'node-c', 'node-f']);
  await Promise.all([a.stop(), c.stop(), f.stop()]);
  await redis.del(keys.nodeSettings());
});

test('at start the mismatch is a warning naming the setting and both values; at shutdown the node\'s entry goes', async () => {
  const lines: Array<{ msg: string; setting?: string }> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done): void {
      lines.push(JSON.parse(chunk.toString()) as { msg: string });
      done();
    },
  });
  const logger = pino({ level: 'warn' }, sink) as unknown as Logger;
  const [d, e] = [await node('node-d'), await node('node-e')];
  const withdrawD = (await announceSharedSettings(redis, keys, d, config({ broadcastStreamCap: '20' }), createLogger('silent'))).withdraw;
  const withdrawE = (await announceSharedSettings(redis, keys, e, config(), logger)).withdraw;
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(lines.length, 1, JSON.stringify(lines));
  assert.equal(lines[0]?.setting, 'PIXIU_BROADCAST_STREAM_CAP');
  assert.match(lines[0]?.msg ?? '', /^PIXIU_BROADCAST_STREAM_CAP is 10000 on this node but 20 on node node-d: .*give every node the same/);
  await withdrawD();
  assert.deepEqual(Object.keys(await redis.hgetall(keys.nodeSettings())), ['node-e']);
  await withdrawE();
  assert.equal(await redis.exists(keys.nodeSettings()), 0);
});

test('a service publishes its shared settings at start and takes them away when it stops', async (t) => {
  const files = cleanupList();
  t.after(() => files.run());
  const prefixed = new Keys('shared-e2e:');
  const running = await startInProcess(files, { redisUrl: server.url, redisPrefix: 'shared-e2e:', inboxCap: '7' });
  const published = await redis.hgetall(prefixed.nodeSettings());
  assert.equal(Object.keys(published).length, 1);
  assert.equal((JSON.parse(Object.values(published)[0] as string) as { inboxCap: number }).inboxCap, 7);
  await running.service.close();
  assert.equal(await redis.exists(prefixed.nodeSettings()), 0);
});

test('after Redis lost its data, a running service writes its shared settings and the cluster secret back (within one registry renewal), so a node started then is still compared', { timeout: 30_000 }, async (t) => {
  const files = cleanupList();
  t.after(() => files.run());
  const prefix = 'shared-flush:';
  const prefixed = new Keys(prefix);
  await startInProcess(files, { redisUrl: server.url, redisPrefix: prefix, inboxCap: '7' });
  const secret = await redis.get(prefixed.clusterSecret());
  assert.ok(secret !== null);
  // A FLUSHALL, of this prefix's keys.
  await flushPrefix(redis, prefix);
  await waitUntil('the settings and the secret are back', async () =>
    await redis.exists(prefixed.nodeSettings()) === 1 && await redis.get(prefixed.clusterSecret()) === secret, 15_000, 50);
  const published = await redis.hgetall(prefixed.nodeSettings());
  assert.deepEqual(Object.values(published).map((v) => (JSON.parse(v) as { inboxCap: number }).inboxCap), [7]);
});

test('the cluster secret written back after Redis lost it does not wait out the refresh rate limit that guards refused peers', async () => {
  const prefixed = new Keys('secret-back:');
  const secret = await ClusterSecret.load(redis, prefixed);
  const held = await redis.get(prefixed.clusterSecret());
  // A refused peer just made it re-read: a refresh now is skipped (at most one a second).
  await secret.refresh();
  await redis.del(prefixed.clusterSecret());
  assert.equal(await secret.refresh(), false);
  assert.equal(await redis.exists(prefixed.clusterSecret()), 0, 'the rate-limited refresh wrote nothing');
  await secret.writeBack();
  assert.equal(await redis.get(prefixed.clusterSecret()), held, 'written back at once, this node\'s copy');
});

test('a live registration of this node\'s own store is not compared; its entry goes only when it is the predecessor the start found left behind; another store\'s still is compared', async () => {
  const [old, copy, other, restarted] = [await node('node-old'), await node('node-copy'), await node('node-other'), await node('node-restarted')];
  assert.deepEqual(await publishSharedSettings(redis, keys, old, config({ inboxCap: '5' }), 'store-1'), []);
  // A copy of the same data dir running beside (its writes suspended, but alive).
  await publishSharedSettings(redis, keys, copy, config({ inboxCap: '6' }), 'store-1');
  await publishSharedSettings(redis, keys, other, config({ inboxCap: '5' }), 'store-2');
  // node-old never stopped (killed): still registered, with the same store as node-restarted.
  assert.deepEqual(await publishSharedSettings(redis, keys, restarted, config(), 'store-1', 'node-old'), [
    { setting: 'inboxCap', env: 'PIXIU_INBOX_CAP', here: 10_000, there: 5, nodes: ['node-other'] },
  ]);
  assert.deepEqual(Object.keys(await redis.hgetall(keys.nodeSettings())).sort(), ['node-copy', 'node-other', 'node-restarted'],
    'the predecessor left behind goes; the live copy keeps its entry');
  await Promise.all([old.stop(), copy.stop(), other.stop(), restarted.stop()]);
  await redis.del(keys.nodeSettings());
});

test('a node restarted on its data dir after kill -9 with another inbox cap is not warned of a mismatch with its dead predecessor', { timeout: 30_000 }, async (t) => {
  const files = cleanupList();
  t.after(() => files.run());
  const dataDir = await tempDataDir(files);
  const prefix = 'shared-kill9:';
  const child = await spawnServe({ PIXIU_REDIS_URL: server.url, PIXIU_REDIS_PREFIX: prefix, PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0', PIXIU_INBOX_CAP: '5', PIXIU_LOG_LEVEL: 'info' }, files);
  assert.equal((await child.kill()).signal, 'SIGKILL');
  // Its registration lives on until its TTL lapses: restarted at once, it is still "live".
  assert.equal(Object.keys(await redis.hgetall(new Keys(prefix).nodeSettings())).length, 1);
  const captured = capturingLogger();
  const config = loadConfig({}, { port: '0', claimsSettleMs: '0', dataDir, redisUrl: server.url, redisPrefix: prefix, inboxCap: '5000' });
  const service = await startService(config, captured.logger);
  files.after(() => service.close());
  assert.deepEqual(captured.lines.filter((l) => l.setting !== undefined).map((l) => l.msg), []);
  const published = await redis.hgetall(new Keys(prefix).nodeSettings());
  assert.deepEqual(Object.values(published).map((v) => (JSON.parse(v) as { inboxCap: number }).inboxCap), [5000], 'the predecessor\'s entry is gone');
});

test('nodes sharing another value are named in one mismatch; a setting an older release\'s entry lacks is no mismatch; the nodes of this store count as compared', async () => {
  const [g, h, i] = [await node('node-g'), await node('node-h'), await node('node-i')];
  await publishSharedSettings(redis, keys, g, config({ inboxCap: '5' }));
  await publishSharedSettings(redis, keys, h, config({ inboxCap: '5' }));
  // A live node of an older release, whose entry names only some of the settings (of another store).
  const old = await node('node-old-release');
  await redis.hset(keys.nodeSettings(), 'node-old-release', JSON.stringify({ inboxCap: 10_000, store: 'store-old' }));
  // A live copy of this node's store (not compared, but its entry was read).
  const copy = await node('node-copy-2');
  await publishSharedSettings(redis, keys, copy, config({ inboxCap: '6' }), 'store-i');
  const found = await compareNodeEntries(redis, keys, i, config(), { storeId: 'store-i' });
  // The nodes in the order their entries were read (a hash's: not the order written).
  assert.deepEqual(found.settings.map((m) => ({ ...m, nodes: [...m.nodes].sort() })), [{ setting: 'inboxCap', env: 'PIXIU_INBOX_CAP', here: 10_000, there: 5, nodes: ['node-g', 'node-h'] }],
    'before: one mismatch per node of the same value; or the settings node-old-release names none of, as mismatches with undefined');
  assert.deepEqual([...found.compared].sort(), ['node-copy-2', 'node-g', 'node-h', 'node-old-release'],
    'node-copy-2 included: the running node\'s check of joiners (joiner-secrets.ts) does not compare it again');
  await Promise.all([g.stop(), h.stop(), i.stop(), old.stop(), copy.stop()]);
  await redis.del(keys.nodeSettings());
});

test('a write-back tried again after one that failed logs its failure at debug, the first one at warn', async () => {
  const { logger, lines } = capturingLogger();
  const j = await node('node-j');
  const down = await createRedis({ url: server.url, commandTimeoutMs: 2000 });
  down.disconnect(); // its commands now fail at once (no offline queue)
  const announced = await announceSharedSettings(down, keys, j, config(), logger);
  assert.equal(await announced.republish(true), false);
  const couldNot = lines.filter((l) => /^could not compare the shared settings/.test(String(l.msg))).map((l) => l.level);
  assert.deepEqual(couldNot, [40, 20], 'before: a warn line at every renewal while Redis refuses it');
  await j.stop();
});
