/**
 * Two `pixiu serve` started at once on one data dir (a supervisor and a
 * person, two `npm start`s). One must refuse to start and leave the other and its
 * redis-server alone (docs/decisions.md: a second start on a data dir in use exits 1
 * with "data dir … is in use", and the running one is untouched). The embedded Redis's
 * start holds a lock on `<dataDir>/redis/lock` (src/redis/local-server.ts). Before it, both
 * spawned a redis-server on the one AOF folder and socket; the one that then lost the
 * store's LevelDB lock stopped its redis-server, which removed the shared socket file:
 * the survivor logged `pixiu listening` and answered 503 for good.
 *
 * With a shared Redis (`PIXIU_REDIS_URL`) the start takes the same lock, before it
 * reaches Redis (src/redis/dir-lock.ts): the loser exits 1 with "data dir … is in use",
 * having claimed nothing and written nothing about where the data dir runs (walk38 F1:
 * before, partition 0's LevelDB lock was the first, and the loser had claimed the data
 * dir's partitions and recorded its Redis in the LAYOUT by then).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { listeningUrl, spawnCli, type CliProcess } from '../harness/cli-process.js';
import { redisServersOf } from '../harness/embedded-data-dir.js';
import { REPO_ROOT } from '../harness/pixiu-server.js';
import { freePort, RedisServer } from '../harness/redis-server.js';

const API_TOKEN = 'concurrent-start-token-0123456789';

/** Resolves with the URL once it listens, or undefined once it has exited. */
function outcome(serve: CliProcess): Promise<string | undefined> {
  return serve.line((l) => listeningUrl(l) !== undefined, 'the listening line').then((l) => listeningUrl(l), () => undefined);
}

/**
 * Starts two `pixiu serve` at once with `env` (the built CLI, npm start's: without tsx's
 * compile time, the two starts meet) and asserts exactly one runs and the other exits 1.
 * @returns the running one's URL and the one that exited
 */
async function startTwice(t: TestContext, env: Record<string, string>): Promise<{ url: string; loser: CliProcess }> {
  const main = path.join(REPO_ROOT, 'dist', 'cli', 'main.js');
  const [portA, portB] = [await freePort(), await freePort()];
  const a = spawnCli([], env, t, { command: [process.execPath, main, 'serve', '--port', String(portA)] });
  const b = spawnCli([], env, t, { command: [process.execPath, main, 'serve', '--port', String(portB)] });
  const [urlA, urlB] = await Promise.all([outcome(a), outcome(b)]);
  const urls = [urlA, urlB].filter((u) => u !== undefined);
  assert.equal(urls.length, 1, `exactly one serve runs\nA:\n${a.stderr()}\nB:\n${b.stderr()}`);
  const loser = urlA === undefined ? a : b;
  assert.equal((await loser.exited).code, 1);
  return { url: urls[0] as string, loser };
}

/** Asserts the serve at `url` takes a message and is ready. */
async function takesMessages(url: string): Promise<void> {
  const res = await fetch(`${url}/v1/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ to: 'ann', type: 't', data: 1 }),
  });
  assert.equal(res.status, 201, `the serve that runs takes messages: ${await res.text()}`);
  const ready = await fetch(`${url}/readyz`);
  assert.equal(ready.status, 200);
}

test('two serves started at once on one data dir: one refuses, the other keeps working', { timeout: 90_000 }, async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'pixiu-twice-'));
  t.after(async () => {
    await delay(500);
    for (const pid of redisServersOf(dataDir)) process.kill(pid, 'SIGKILL');
    await rm(dataDir, { recursive: true, force: true });
  });
  const { url } = await startTwice(t, { PIXIU_DATA_DIR: dataDir, PIXIU_API_TOKEN: API_TOKEN, PIXIU_LOG_LEVEL: 'info' });
  // The loser stops what it started before it exits: one redis-server is left, at once.
  assert.equal(redisServersOf(dataDir).length, 1, 'one redis-server on the data dir');
  await takesMessages(url);
});

/*
 * With a shared Redis too the data dir's lock is taken first (src/redis/dir-lock.ts).
 * Before it, partition 0's LevelDB lock was the first (message-store.ts;
 * test/store/open-race.test.ts for many rounds), and before that the two could split
 * the partitions between them and both exit 1 (2 runs of 6).
 */
test('two serves started at once on one data dir with a shared Redis: one runs, the other exits 1 with the data dir in use', { timeout: 90_000 }, async (t) => {
  const redis = await RedisServer.start();
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'pixiu-twice-shared-'));
  t.after(async () => {
    await redis.destroy();
    await rm(dataDir, { recursive: true, force: true });
  });
  // No claims-settle wait on this new Redis: both would wait it out alike.
  const { url, loser } = await startTwice(t, {
    PIXIU_DATA_DIR: dataDir, PIXIU_API_TOKEN: API_TOKEN, PIXIU_LOG_LEVEL: 'info', PIXIU_REDIS_URL: redis.url, PIXIU_CLAIMS_SETTLE: '0',
  });
  // README "Commands": two starts on one data dir, whichever Redis they use.
  assert.match(loser.stderr(), new RegExp(`^pixiu: data dir ${dataDir} is in use: another pixiu is starting or running on it \\(${path.join(dataDir, 'redis', 'lock')} is locked\\)`, 'm'));
  await takesMessages(url);
});

test('two starts of the embedded Redis of one data dir at once: one redis-server, the other start refused', { timeout: 60_000 }, async (t) => {
  const { startLocalRedis } = await import('../../src/redis/local-server.js');
  const { createLogger } = await import('../../src/logger.js');
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'pixiu-twice-lib-'));
  t.after(async () => {
    for (const pid of redisServersOf(dataDir)) process.kill(pid, 'SIGKILL');
    await rm(dataDir, { recursive: true, force: true });
  });
  const logger = createLogger('silent');
  const results = await Promise.allSettled([startLocalRedis({ dataDir, logger }), startLocalRedis({ dataDir, logger })]);
  const started = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const refused = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as Error] : []));
  const servers = redisServersOf(dataDir).length;
  for (const s of started) await s.stop();
  assert.equal(servers, 1, `redis-servers running on ${dataDir}`);
  assert.equal(started.length, 1);
  assert.match(refused[0]?.message ?? '', /in use/);
});

