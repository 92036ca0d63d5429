/**
 * `pixiu redis lost-writes` lets its Redis go whatever happened (src/cli/redis-to-write.ts
 * `withRedisToWrite`), and a close that fails after the command's work failed does not
 * hide why the command failed (review35 5: a `finally` awaiting the close threw the
 * close's error instead — a replica's refusal, a prefix no service used, never seen).
 * No Redis: a stand-in target whose close the test makes fail. And a stopped data dir
 * that last ran on a shared Redis is refused with the command's own advice, and one whose
 * `redis/` holds only the data dir's lock (every serve takes it, with PIXIU_REDIS_URL too) as
 * holding no embedded Redis's data.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { StartupError } from '../../src/errors.js';
import { connectToWrite, withRedisToWrite, type RedisToWrite } from '../../src/cli/redis-to-write.js';
import { LAYOUT_FORMAT, PARTITION_HASH, newStoreId } from '../../src/store/layout.js';
import { lockDataDir } from '../../src/redis/dir-lock.js';

/** A target whose close fails with `closeError` (none: it succeeds); counts its closes. */
function target(closeError?: Error): RedisToWrite & { closes: number } {
  const t = {
    redis: {} as Redis, where: 'the embedded Redis of /d', started: true, next: 'Now start the node.', closes: 0,
    close: async (): Promise<void> => {
      t.closes += 1;
      if (closeError !== undefined) throw closeError;
    },
  };
  return t;
}

test('the work\'s failure is thrown even when the close fails too; the close\'s failure is told, not lost', async () => {
  const to = target(new Error('redis-server did not stop'));
  const told: unknown[] = [];
  const refused = new StartupError('this Redis is a replica (role slave)');
  await assert.rejects(withRedisToWrite(to, async () => { throw refused; }, (err) => told.push(err)), (err: unknown) => err === refused);
  assert.equal(to.closes, 1);
  assert.deepEqual(told.map((e) => (e as Error).message), ['redis-server did not stop']);
});

test('after the work succeeded, a failed close is the command\'s failure (its AOF may not be written); a good one answers the work\'s result', async () => {
  const told: unknown[] = [];
  await assert.rejects(withRedisToWrite(target(new Error('redis-server did not stop')), async () => 'raised', (err) => told.push(err)), /did not stop/);
  assert.deepEqual(told, [], 'thrown, not only told');
  const fine = target();
  assert.equal(await withRedisToWrite(fine, async () => 'raised'), 'raised');
  assert.equal(fine.closes, 1);
});

test('a stopped data dir whose store last ran on a shared Redis is refused with the Redis to run against, not serve\'s way out (walk23 L1)', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pixiu-ltw-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  await mkdir(path.join(dataDir, 'redis'), { mode: 0o700 });
  await mkdir(path.join(dataDir, 'xiu'), { mode: 0o700 });
  await writeFile(path.join(dataDir, 'xiu', 'LAYOUT'), JSON.stringify({ format: LAYOUT_FORMAT, partitions: 8, hash: PARTITION_HASH, storeId: newStoreId(), redisPrefix: 'mig:' }));
  await assert.rejects(connectToWrite({ dataDir, redisUrl: undefined, redisCommandTimeoutMs: 1000 }), (err: unknown) => {
    assert.ok(err instanceof StartupError);
    assert.match(err.message, /last ran on the Redis of PIXIU_REDIS_URL \(key prefix "mig:"\)/);
    assert.match(err.message, /set PIXIU_REDIS_URL to it and PIXIU_REDIS_PREFIX to "mig:"/);
    // serve's refusal tells how to run the data dir on a Redis of its own: wrong advice here.
    assert.doesNotMatch(err.message, /delete "redisPrefix"/);
    return true;
  });
  assert.deepEqual(await readdir(path.join(dataDir, 'redis')), [], 'no redis-server started there');
});

test('a stopped data dir whose redis/ holds only the data dir\'s lock (a serve with PIXIU_REDIS_URL takes it too) is refused as holding no embedded Redis data, starting none', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pixiu-ltw-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const lock = await lockDataDir(dataDir);
  await lock.close();
  await assert.rejects(connectToWrite({ dataDir, redisUrl: undefined, redisCommandTimeoutMs: 1000 }), (err: unknown) => {
    assert.ok(err instanceof StartupError);
    assert.match(err.message, /and no embedded Redis data there \(only the data dir's lock in .*\/redis\): set PIXIU_DATA_DIR to the data dir of the node/);
    return true;
  });
  assert.deepEqual(await readdir(path.join(dataDir, 'redis')), ['lock'], 'no redis-server started there');
});
