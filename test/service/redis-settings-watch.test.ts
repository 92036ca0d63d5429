/**
 * Redis's persistence and eviction settings changed at runtime (src/redis/settings-watch.ts),
 * against a private redis-server changed with CONFIG SET: each change is warned about
 * once, in the start-up warning's words with `changedFrom`, and its undoing said once
 * at info; a serving node reads them again after a reconnect too (as after a Redis
 * restarted with another configuration), not only at its start (a black-box SRE's
 * finding: `appendonly no` and `allkeys-lru` set under running nodes were never noticed).
 * Under an evicting policy, a maxmemory set where there was none is such a change: the
 * moment eviction begins (walk13: it was said nothing of until keys were evicted).
 */
import { after, before, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { createRedis } from '../../src/redis/client.js';
import { RedisSettingsWatch } from '../../src/redis/settings-watch.js';
import { waitUntil } from '../harness/checks.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { cleanupList, startInProcess } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

const files = cleanupList();
let server: RedisServer;
let admin: Redis;

before(async () => {
  server = await RedisServer.start({ aof: true });
  files.after(() => server.destroy());
  admin = await createRedis({ url: server.url, commandTimeoutMs: 5000, name: 'pixiu:test-admin' });
  files.after(() => admin.quit());
});

after(() => files.run());

/** Between two reads of the watch under test, ms. */
const INTERVAL_MS = 50;

const changes = (lines: readonly LogLine[]): string[] => lines.filter((l) => l.changedFrom !== undefined).map((l) => `${l.level} ${l.msg ?? ''}`);

test('a setting changed at runtime is warned about once, with what it was, and its undoing said once at info', async (t) => {
  const { logger, lines } = capturingLogger();
  const watch = new RedisSettingsWatch(admin, 'redis://test', logger, { persistence: 'aof', policy: 'noeviction' }, INTERVAL_MS);
  watch.start();
  t.after(() => watch.stop());
  t.after(async () => {
    await admin.config('SET', 'appendonly', 'yes');
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
  });
  /** Waits for `count` change lines, then for ten more reads (a window for a repeat that must not come), and answers them all. */
  const settled = async (count: number): Promise<string[]> => {
    await waitUntil(`${count} change lines`, () => Promise.resolve(changes(lines).length >= count), 5000, 10);
    await delay(10 * INTERVAL_MS);
    return changes(lines);
  };

  await admin.config('SET', 'appendonly', 'no');
  assert.deepEqual(await settled(1), [
    '40 Redis does not persist (appendonly no, no save rules): a Redis restart loses every inbox, and messages already acknowledged never reach recipients who were offline; run it with appendonly yes (DESIGN.md §4, storage/redis.conf)',
  ], 'one warning, not one per read');
  assert.equal(lines.find((l) => l.changedFrom !== undefined)?.changedFrom, 'aof');

  await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
  const evicting = await settled(2);
  assert.equal(evicting.length, 2, JSON.stringify(evicting));
  assert.match(evicting[1] ?? '', /^40 Redis may evict keys \(maxmemory-policy allkeys-lru\): once a maxmemory is set \(none is now\) it drops inbox entries/);

  await admin.config('SET', 'appendonly', 'yes');
  await admin.config('SET', 'maxmemory-policy', 'noeviction');
  const back = await settled(4);
  assert.deepEqual(back.slice(2).sort(), ['30 Redis no longer evicts keys (maxmemory-policy noeviction)', '30 Redis persists with AOF again (appendonly yes)']);
});

test('a setting CONFIG could not read at start is not watched', async (t) => {
  const { logger, lines } = capturingLogger();
  const watch = new RedisSettingsWatch(admin, 'redis://test', logger, { persistence: undefined, policy: undefined }, INTERVAL_MS);
  watch.start();
  t.after(() => watch.stop());
  t.after(() => admin.config('SET', 'appendonly', 'yes'));
  await admin.config('SET', 'appendonly', 'no');
  await watch.checkNow();
  // A window for lines that must not come (no event to wait on): five more reads' time.
  await delay(5 * INTERVAL_MS);
  assert.deepEqual(changes(lines), []);
});

test('a serving node reads the settings again when its connection to Redis comes back, and warns once about the change', async (t) => {
  const { logger, lines } = capturingLogger();
  await startInProcess(t, { redisUrl: server.url, redisPrefix: 'settings-watch:' }, logger);
  assert.deepEqual(changes(lines), [], 'nothing to say at start: AOF and noeviction');
  t.after(() => admin.config('SET', 'maxmemory-policy', 'noeviction'));
  await admin.config('SET', 'maxmemory-policy', 'volatile-lru');
  // The node's connections dropped (the admin's own is skipped): its reconnect reads them.
  await admin.call('CLIENT', 'KILL', 'TYPE', 'normal');
  await waitUntil('the change warned about', () => Promise.resolve(changes(lines).length > 0), 10_000, 20);
  const [warning] = lines.filter((l) => l.changedFrom !== undefined);
  assert.equal(warning?.level, 40);
  assert.equal(warning?.maxmemoryPolicy, 'volatile-lru');
  assert.equal(warning?.changedFrom, 'noeviction');
  assert.match(warning?.msg ?? '', /^Redis may evict keys \(maxmemory-policy volatile-lru\)/);
});

/** Sets `maxmemory-policy allkeys-lru` on the test's Redis, with no maxmemory, until `t` ends. */
async function underEvictingPolicy(t: TestContext): Promise<void> {
  t.after(async () => {
    await admin.config('SET', 'maxmemory', '0');
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
  });
  await admin.config('SET', 'maxmemory', '0');
  await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
}

test('under an evicting policy, a maxmemory set where there was none is warned about once each time: eviction begins then', async (t) => {
  await underEvictingPolicy(t);
  const { logger, lines } = capturingLogger();
  const watch = new RedisSettingsWatch(admin, 'redis://test', logger, { persistence: 'aof', policy: 'allkeys-lru', maxmemory: 0 }, INTERVAL_MS);
  watch.start();
  t.after(() => watch.stop());
  /** Sets maxmemory, then waits for ten reads (a window for a repeat that must not come) and answers the change lines so far. */
  const afterSetting = async (maxmemory: string): Promise<string[]> => {
    await admin.config('SET', 'maxmemory', maxmemory);
    await watch.checkNow();
    await delay(10 * INTERVAL_MS);
    return changes(lines);
  };
  const warning = (bytes: number): string => `40 Redis may evict keys (maxmemory-policy allkeys-lru): when it reaches maxmemory (${bytes} bytes) it drops inbox entries, `
    + 'ack cursors and epochs silently, and messages already acknowledged are lost; run it with maxmemory-policy noeviction (a full Redis then refuses writes, '
    + 'and Pixiu answers 503 with Retry-After) (DESIGN.md §4, storage/redis.conf)';

  assert.deepEqual(await afterSetting('104857600'), [warning(104857600)], 'one warning, not one per read');
  const [line] = lines.filter((l) => l.changedFrom !== undefined);
  assert.deepEqual([line?.changedFrom, line?.maxmemory, line?.maxmemoryPolicy], ['maxmemory 0', 104857600, 'allkeys-lru']);
  // Another limit is no new danger; none again, then one again, is.
  assert.deepEqual(await afterSetting('209715200'), [warning(104857600)]);
  assert.deepEqual(await afterSetting('0'), [warning(104857600)]);
  assert.deepEqual(await afterSetting('52428800'), [warning(104857600), warning(52428800)]);
});

test('a serving node started under an evicting policy with no maxmemory warns when one is set', async (t) => {
  await underEvictingPolicy(t);
  const { logger, lines } = capturingLogger();
  await startInProcess(t, { redisUrl: server.url, redisPrefix: 'settings-watch-maxmemory:' }, logger);
  assert.ok(lines.some((l) => l.level === 40 && l.msg?.includes('once a maxmemory is set (none is now)') === true), 'the start-up warning');
  assert.deepEqual(changes(lines), []);
  await admin.config('SET', 'maxmemory', '104857600');
  // The node's connections dropped (the admin's own is skipped): its reconnect reads them.
  await admin.call('CLIENT', 'KILL', 'TYPE', 'normal');
  await waitUntil('the change warned about', () => Promise.resolve(changes(lines).length > 0), 10_000, 20);
  const [warning] = lines.filter((l) => l.changedFrom !== undefined);
  assert.deepEqual([warning?.level, warning?.changedFrom, warning?.maxmemory], [40, 'maxmemory 0', 104857600]);
  assert.match(warning?.msg ?? '', /^Redis may evict keys \(maxmemory-policy allkeys-lru\): when it reaches maxmemory \(104857600 bytes\)/);
});
