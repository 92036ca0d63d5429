/**
 * A second start on a data dir a node serves, with the other kind of Redis (an
 * environment file mixed up): it exits 1 saying why and leaves the running node's data
 * dir as it was (README "Commands": "one runs, the other exits 1 saying why").
 *
 * Before, a start with `PIXIU_REDIS_URL` on a data dir served with the embedded Redis
 * took no lock of the data dir until its store's partition 0: it failed there, but only
 * after it had claimed the store's partitions on its Redis and written that Redis's
 * `redisPrefix`/`redisDb` into `xiu/LAYOUT`. The running node then could not restart
 * ("last ran on the Redis of PIXIU_REDIS_URL"), and following that advice started it on
 * the other Redis, where none of its inboxes are, without a word (walk38 F1). Now every
 * start takes the data dir's lock (`<dataDir>/redis/lock`) before it starts or reaches
 * any Redis (src/redis/dir-lock.ts; docs/decisions.md, "Embedded Redis").
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Redis } from 'ioredis';
import { embeddedDataDir, redisServersOf } from '../harness/embedded-data-dir.js';
import { PixiuClient, runCli, runEach, spawnServe, type CliResult } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

const API_TOKEN = 'data-dir-lock-token-0123456789';

/** Every key of the Redis at `url` (a test's private one: a handful at most). */
async function keysOf(url: string): Promise<string[]> {
  const redis = new Redis(url, { lazyConnect: true });
  try {
    await redis.connect();
    return (await redis.keys('*')).sort();
  } finally {
    redis.disconnect();
  }
}

/**
 * Runs a second `pixiu serve` with `env` twice at once, on another port and on
 * `port` (the running node's), and asserts each exits 1 saying why: the data dir in
 * use, or the port.
 */
async function refusedTwice(env: Record<string, string>, dataDir: string, port: string): Promise<void> {
  const runs = await runEach(['0', port], (p) => runCli(['serve'], { ...env, PIXIU_PORT: p }));
  const [[, another], [, same]] = runs as [[string, CliResult], [string, CliResult]];
  assert.equal(another.code, 1, another.stdout + another.stderr);
  assert.match(another.stderr, new RegExp(`^pixiu: data dir ${dataDir} is in use: another pixiu is starting or running on it \\(${path.join(dataDir, 'redis', 'lock')} is locked\\)`, 'm'));
  assert.equal(same.code, 1, same.stdout + same.stderr);
  assert.match(same.stderr, new RegExp(`^pixiu: cannot listen on 127\\.0\\.0\\.1:${port}: .*EADDRINUSE`, 'm'));
}

test('a start with PIXIU_REDIS_URL on a data dir an embedded-Redis node serves exits 1 before it writes anything: its LAYOUT stays byte for byte, that Redis holds no claim of it, and the node restarts with every message in its inbox', { timeout: 120_000 }, async (t) => {
  const { dataDir, env: base } = await embeddedDataDir(t, 'pixiu-dirlock-');
  const env = { ...base, PIXIU_API_TOKEN: API_TOKEN };
  const other = await RedisServer.start();
  t.after(() => other.destroy());
  let a = await spawnServe(env, t);
  for (let n = 1; n <= 3; n++) {
    const posted = await new PixiuClient(a.url, API_TOKEN).post('/v1/messages', { to: 'carol', type: 't', data: { n } });
    assert.equal(posted.status, 201, posted.text);
  }
  const layoutFile = path.join(dataDir, 'xiu', 'LAYOUT');
  const layout = await readFile(layoutFile);

  await refusedTwice({ ...env, PIXIU_REDIS_URL: other.url, PIXIU_REDIS_PREFIX: 'w38f:' }, dataDir, new URL(a.url).port);
  assert.deepEqual((await readFile(layoutFile)).toString(), layout.toString(), 'the LAYOUT as the running node left it');
  // No claim, description or lease of the data dir's store there (nor anything else: the start never reached it).
  assert.deepEqual(await keysOf(other.url), []);

  assert.deepEqual(await a.term(), { code: 0, signal: null }, a.stdout() + a.stderr());
  a = await spawnServe(env, t);
  const inbox = await new PixiuClient(a.url, API_TOKEN).get('/v1/users/carol/messages');
  assert.equal(inbox.status, 200, inbox.text);
  const { messages } = inbox.body as { messages: Array<{ seq: number; data: unknown }> };
  assert.deepEqual(messages.map((m) => [m.seq, m.data]), [[1, { n: 1 }], [2, { n: 2 }], [3, { n: 3 }]]);
  assert.deepEqual(await a.term(), { code: 0, signal: null });
});

test('a start with the embedded Redis, or with another Redis, on a data dir a PIXIU_REDIS_URL node serves exits 1 before it writes anything: no redis-server on the data dir, its LAYOUT unchanged, no claim on the other Redis', { timeout: 120_000 }, async (t) => {
  const { dataDir, env: base } = await embeddedDataDir(t, 'pixiu-dirlock-url-');
  const [shared, other] = await Promise.all([RedisServer.start(), RedisServer.start()]);
  t.after(() => Promise.all([shared.destroy(), other.destroy()]));
  // No claims-settle wait on these new Redis servers: nothing else runs on them.
  const env = { ...base, PIXIU_API_TOKEN: API_TOKEN, PIXIU_CLAIMS_SETTLE: '0' };
  const a = await spawnServe({ ...env, PIXIU_REDIS_URL: shared.url }, t);
  const layoutFile = path.join(dataDir, 'xiu', 'LAYOUT');
  const layout = await readFile(layoutFile);
  const port = new URL(a.url).port;

  await refusedTwice(env, dataDir, port);
  assert.deepEqual(redisServersOf(dataDir), [], 'no embedded redis-server started on the data dir');
  await refusedTwice({ ...env, PIXIU_REDIS_URL: other.url }, dataDir, port);
  assert.deepEqual(await keysOf(other.url), []);
  assert.deepEqual((await readFile(layoutFile)).toString(), layout.toString(), 'the LAYOUT as the running node left it');

  const posted = await new PixiuClient(a.url, API_TOKEN).post('/v1/messages', { to: 'dan', type: 't', data: 1 });
  assert.equal(posted.status, 201, posted.text);
  assert.deepEqual(await a.term(), { code: 0, signal: null }, a.stdout() + a.stderr());
});
