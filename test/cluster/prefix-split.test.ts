/**
 * A data dir started with another PIXIU_REDIS_PREFIX than the one it last ran with on a
 * shared Redis (src/cluster/prefix-guard.ts; docs/decisions.md, "Several nodes"): while
 * nodes run under the recorded prefix, the start is refused — it would be a second
 * cluster on the Redis, answering 201 to messages the others never deliver (a black-box
 * SRE's finding: 254 messages acknowledged into `py:` inboxes nobody read). The same
 * prefix starts; the other prefix once those nodes are gone starts too, with the
 * store ownership's error line of a Redis that does not know the store (the recovery
 * case: Redis lost its data, or a move on purpose).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createRedis } from '../../src/redis/client.js';
import { listeningUrl, spawnCli } from '../harness/cli-process.js';
import { logLines } from '../harness/log-capture.js';
import { PixiuClient, cleanupList, spawnServe, tempDataDir } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

const TOKEN = 'prefix-split-token-0123456789';
const SECRET = 'prefix-split-jwt-secret-0123456789abcdef';

/**
 * Runs `pixiu serve` with `env` and asserts it is refused: it never listens and exits 1.
 * @returns its stderr (the refusal) and its stdout (its log)
 */
async function refusedStart(env: Record<string, string>, t: TestContext, what: string): Promise<{ message: string; log: string }> {
  const refused = spawnCli(['serve'], env, t);
  const listened = await refused.line((l) => listeningUrl(l) !== undefined, 'the listening line').then(() => true, () => false);
  assert.equal(listened, false, what);
  assert.equal((await refused.exited).code, 1, refused.stderr() + refused.stdout());
  return { message: refused.stderr(), log: refused.stdout() };
}

test('a data dir that ran under p: is refused under q: while a node runs under p:, starts under p:, and starts under q: (with the unknown-store error) once the p: nodes are gone', { timeout: 120_000 }, async (t) => {
  const files = cleanupList();
  t.after(() => files.run());
  const redis = await RedisServer.start();
  files.after(() => redis.destroy());
  const probe = await createRedis({ url: redis.url, commandTimeoutMs: 2000 });
  files.after(() => probe.disconnect());
  const [dirA, dirB] = [await tempDataDir(files), await tempDataDir(files)];
  const env = (dataDir: string, prefix: string): Record<string, string> => ({
    PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: prefix, PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0',
    PIXIU_API_TOKEN: TOKEN, PIXIU_JWT_SECRET: SECRET, PIXIU_LOG_LEVEL: 'info',
  });

  const a = await spawnServe(env(dirA, 'p:'), t);
  // The listening line names the key prefix beside the Redis URL.
  const [listening] = logLines(a.stdout(), 'pixiu listening');
  assert.equal(listening?.redisPrefix, 'p:');
  assert.equal(listening?.redis, redis.url);
  // B runs under p: once, stores a message, and stops: its LAYOUT records p:.
  let b = await spawnServe(env(dirB, 'p:'), t);
  const posted = await new PixiuClient(b.url, TOKEN).post('/v1/messages', { to: 'bob', type: 't', data: 1 });
  assert.equal(posted.status, 201, posted.text);
  assert.equal((await b.term()).code, 0);
  const layout = JSON.parse(await readFile(path.join(dirB, 'xiu', 'LAYOUT'), 'utf8')) as { redisPrefix?: string };
  assert.equal(layout.redisPrefix, 'p:');
  const nodeA = logLines(a.stdout(), 'gateway started')[0]?.node;
  assert.equal(typeof nodeA, 'string');

  // Under q: while A runs under p:: refused, exit 1, naming both prefixes, A and what to do; it never listened.
  const { message } = await refusedStart(env(dirB, 'q:'), t, 'the start under q: is refused, not served');
  assert.match(message, /last ran with PIXIU_REDIS_PREFIX "p:" on this Redis/);
  assert.match(message, /is started with PIXIU_REDIS_PREFIX "q:"/);
  assert.ok(message.includes(`node ${String(nodeA)} runs under it now`), message);
  assert.match(message, /Start it with PIXIU_REDIS_PREFIX=p: to serve with them/);
  assert.match(message, /stop the nodes under "p:" first/);
  // Nothing of it under q:: no registration, no claim.
  assert.deepEqual(await probe.keys('q:*'), []);

  // Under p:: starts.
  b = await spawnServe(env(dirB, 'p:'), t);
  assert.equal((await b.term()).code, 0);

  // A gone: under q: starts, with today's error line of a store this Redis (prefix) does not know.
  assert.equal((await a.term()).code, 0);
  b = await spawnServe(env(dirB, 'q:'), t);
  const errors = b.stdout().split('\n').filter((l) => l.includes('"level":50'));
  assert.equal(errors.length, 1, errors.join('\n'));
  assert.match(errors[0] ?? '', /this Redis does not know this data dir's store, which has stored messages/);
  assert.equal(logLines(b.stdout(), 'pixiu listening')[0]?.redisPrefix, 'q:');
  const moved = JSON.parse(await readFile(path.join(dirB, 'xiu', 'LAYOUT'), 'utf8')) as { redisPrefix?: string };
  assert.equal(moved.redisPrefix, 'q:');
  assert.equal((await b.term()).code, 0);

  // Back under p:, where its store is known from its first start: the unknown-store line
  // does not come, and the move's own line says what it stored under q: is not here.
  b = await spawnServe(env(dirB, 'p:'), t);
  const back = b.stdout().split('\n').filter((l) => l.includes('"level":50'));
  assert.equal(back.length, 1, back.join('\n'));
  assert.match(back[0] ?? '', /this data dir last ran with PIXIU_REDIS_PREFIX \\"q:\\" and now runs with \\"p:\\": the messages it stored under \\"q:\\" are in inboxes under \\"q:\\" only/);
  assert.equal((await b.term()).code, 0);
});

test('a data dir that ran under p: on one Redis starts under q: on another Redis where an unrelated cluster runs under p:: this Redis never knew its store, so it is not asked to join that cluster', { timeout: 120_000 }, async (t) => {
  const files = cleanupList();
  t.after(() => files.run());
  const [first, second] = [await RedisServer.start(), await RedisServer.start()];
  files.after(() => first.destroy());
  files.after(() => second.destroy());
  const [dirB, dirOther] = [await tempDataDir(files), await tempDataDir(files)];
  const env = (url: string, dataDir: string, prefix: string): Record<string, string> => ({
    PIXIU_REDIS_URL: url, PIXIU_REDIS_PREFIX: prefix, PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0',
    PIXIU_API_TOKEN: TOKEN, PIXIU_JWT_SECRET: SECRET, PIXIU_LOG_LEVEL: 'info',
  });
  // B ran under p: on the first Redis and stored a message.
  let b = await spawnServe(env(first.url, dirB, 'p:'), t);
  assert.equal((await new PixiuClient(b.url, TOKEN).post('/v1/messages', { to: 'bob', type: 't', data: 1 })).status, 201);
  assert.equal((await b.term()).code, 0);
  // Another cluster runs under p: on the second Redis.
  const other = await spawnServe(env(second.url, dirOther, 'p:'), t);
  // B under q: on the second Redis: starts (the recovery case's error line), not refused.
  b = await spawnServe(env(second.url, dirB, 'q:'), t);
  const errors = b.stdout().split('\n').filter((l) => l.includes('"level":50'));
  assert.equal(errors.length, 1, errors.join('\n'));
  assert.match(errors[0] ?? '', /this Redis does not know this data dir's store, which has stored messages/);
  assert.equal(logLines(b.stdout(), 'pixiu listening')[0]?.redisPrefix, 'q:');
  assert.equal((await b.term()).code, 0);
  assert.equal((await other.term()).code, 0);
});

test('a data dir that ran on a shared Redis is refused a start without PIXIU_REDIS_URL (its own embedded Redis: an island), and starts on one once redisPrefix is deleted from its LAYOUT', { timeout: 120_000 }, async (t) => {
  const files = cleanupList();
  t.after(() => files.run());
  const redis = await RedisServer.start();
  files.after(() => redis.destroy());
  const dir = await tempDataDir(files);
  const env: Record<string, string> = { PIXIU_DATA_DIR: dir, PIXIU_PORT: '0', PIXIU_API_TOKEN: TOKEN, PIXIU_JWT_SECRET: SECRET, PIXIU_LOG_LEVEL: 'info' };
  const shared = await spawnServe({ ...env, PIXIU_REDIS_URL: redis.url }, t);
  assert.equal((await new PixiuClient(shared.url, TOKEN).post('/v1/messages', { to: 'bob', type: 't', data: 1 })).status, 201);
  assert.equal((await shared.term()).code, 0);

  // Without PIXIU_REDIS_URL (an environment file left out): refused, exit 1, before any redis-server is started.
  const { message, log } = await refusedStart(env, t, 'the start without PIXIU_REDIS_URL is refused, not served');
  assert.match(message, /last ran on the Redis of PIXIU_REDIS_URL \(key prefix "px:"\) and is started without PIXIU_REDIS_URL/);
  assert.match(message, /Set PIXIU_REDIS_URL to that Redis \(and PIXIU_REDIS_PREFIX to "px:"\)/);
  const layoutFile = path.join(dir, 'xiu', 'LAYOUT');
  assert.ok(message.includes(`delete "redisPrefix" from ${layoutFile}`), message);
  assert.doesNotMatch(log, /redis-server/, 'no embedded redis-server was started');

  // Moved to a Redis of its own on purpose, as the message says: it starts.
  const { redisPrefix: _dropped, ...layout } = JSON.parse(await readFile(layoutFile, 'utf8')) as { redisPrefix?: string };
  await writeFile(layoutFile, JSON.stringify(layout));
  const alone = await spawnServe(env, t);
  assert.equal((await alone.term()).code, 0);
});

test('a data dir that ran on database 0 of a shared Redis is refused a start on database 1 (an island there), starts on 0, and on 1 once redisDb is deleted from its LAYOUT', { timeout: 120_000 }, async (t) => {
  const files = cleanupList();
  t.after(() => files.run());
  const redis = await RedisServer.start();
  files.after(() => redis.destroy());
  const dir = await tempDataDir(files);
  const env = (url: string): Record<string, string> => ({
    PIXIU_REDIS_URL: url, PIXIU_DATA_DIR: dir, PIXIU_PORT: '0', PIXIU_API_TOKEN: TOKEN, PIXIU_JWT_SECRET: SECRET, PIXIU_LOG_LEVEL: 'info',
  });
  let node = await spawnServe(env(redis.url), t);
  assert.equal((await node.term()).code, 0);
  const layoutFile = path.join(dir, 'xiu', 'LAYOUT');
  assert.equal((JSON.parse(await readFile(layoutFile, 'utf8')) as { redisDb?: number }).redisDb, 0);

  const { message } = await refusedStart(env(`${redis.url}/1`), t, 'the start on database 1 is refused, not served');
  assert.match(message, /last ran on database 0 of the Redis of PIXIU_REDIS_URL and is started on database 1/);
  assert.match(message, /Set PIXIU_REDIS_URL to database 0/);
  assert.ok(message.includes(`delete "redisDb" from ${layoutFile}`), message);

  node = await spawnServe(env(redis.url), t);
  assert.equal((await node.term()).code, 0);
  const { redisDb: _dropped, ...layout } = JSON.parse(await readFile(layoutFile, 'utf8')) as { redisDb?: number };
  await writeFile(layoutFile, JSON.stringify(layout));
  node = await spawnServe(env(`${redis.url}/1`), t);
  assert.equal((await node.term()).code, 0);
  assert.equal((JSON.parse(await readFile(layoutFile, 'utf8')) as { redisDb?: number }).redisDb, 1, 'the move is recorded');
});
