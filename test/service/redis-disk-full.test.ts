/**
 * Redis that refuses writes because it cannot persist to disk (`MISCONF`): the 503 a
 * producer gets, `/readyz` and the log line name Redis's real cause and its fix, each
 * of its two variants in its own words (src/redis/state-replies.ts): its append-only
 * file on a full disk (`MISCONF Errors writing to the AOF file: No space left on
 * device`), and a failed RDB snapshot under `stop-writes-on-bgsave-error`. Both used to
 * be worded as the second, also on a Redis that takes no snapshots (walk13 F2). A real
 * redis-server whose dir is a small tmpfs, filled: root only (skipped otherwise).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import type { Redis } from 'ioredis';
import { createRedis } from '../../src/redis/client.js';
import { expectError, waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { cleanupList, startInProcess, type InProcessServer } from '../harness/pixiu-server.js';
import { RedisServer, type RedisServerOptions } from '../harness/redis-server.js';
import { fill, smallDisk } from '../harness/small-disk.js';

/** A node on a redis-server whose dir is a 2 MiB tmpfs; undefined (the test skipped) when none can be mounted. */
async function nodeOnSmallDisk(t: TestContext, opts: RedisServerOptions) {
  // The service stops, then Redis, then the tmpfs is unmounted (a context runs its
  // `after` steps in the order they were added; a clean-up list, last added first).
  const steps = cleanupList();
  t.after(() => steps.run());
  const disk = await smallDisk(t, '2m');
  if (disk === undefined) {
    t.skip('no right to mount a tmpfs');
    return undefined;
  }
  const redis = await RedisServer.start({ ...opts, args: [...(opts.args ?? []), '--dir', disk] });
  steps.after(() => redis.destroy());
  const admin: Redis = await createRedis({ url: redis.url, commandTimeoutMs: 5000, name: 'pixiu:test-admin' });
  steps.after(() => admin.quit());
  const { logger, lines } = capturingLogger();
  const server: InProcessServer = await startInProcess(steps, { redisUrl: redis.url, redisPrefix: 'disk-full:' }, logger);
  return { disk, admin, lines, client: server.client };
}

test('a Redis whose append-only file is on a full disk: the 503, /readyz and the log name the AOF write and the full disk, not a snapshot; writes resume with room', async (t) => {
  const node = await nodeOnSmallDisk(t, { aof: true });
  if (node === undefined) return;
  const { disk, admin, lines, client } = node;
  const post = (n: number) => client.post('/v1/messages', { to: `u${n % 4}`, type: 't', data: 'x'.repeat(4000), client_msg_id: `aof-${n}` });
  assert.equal((await post(0)).status, 201);

  const filler = await fill(disk);
  // The write that meets the full disk is answered; Redis refuses the ones after it.
  let n = 1;
  let answer = await post(n++);
  while (answer.status === 201 && n < 200) answer = await post(n++);
  const aofFull = /^Redis refuses writes: it cannot write its append-only file \(AOF\): No space left on device \(its disk is full: free space on it; Redis tries the write again every second\)/;
  expectError(answer, 503, 'UNAVAILABLE', aofFull);
  assert.match(answer.text, /; the message may have been stored and appended anyway: retry later with the same client_msg_id/);
  assert.doesNotMatch(answer.text, /snapshot|bgsave/i);
  assert.match(await admin.info('persistence'), /^aof_last_write_status:err\r?$/m);
  expectError(await client.get('/readyz'), 503, 'UNAVAILABLE', aofFull);
  const logged = lines.find((l) => typeof l.reason === 'string' && l.reason.startsWith('Redis refuses writes'));
  assert.match(String(logged?.reason), aofFull, JSON.stringify(logged));
  assert.match(String(logged?.cause), /^MISCONF Errors writing to the AOF file: No space left on device/, 'Redis\'s own text in the cause');

  // Room again: Redis's next try of the AOF write succeeds, and it takes writes.
  await rm(filler);
  await waitUntil('/readyz is 200 again', async () => (await client.get('/readyz')).status === 200, 10_000);
  assert.equal((await post(n++)).status, 201);
});

test('a Redis whose RDB snapshot failed under stop-writes-on-bgsave-error: the 503 and /readyz name the failed snapshot; writes resume once a BGSAVE succeeds', async (t) => {
  const node = await nodeOnSmallDisk(t, { aof: false, args: ['--save', '3600 1'] });
  if (node === undefined) return;
  const { disk, admin, client } = node;
  const post = (n: number) => client.post('/v1/messages', { to: `u${n % 4}`, type: 't', data: 'x'.repeat(4000), client_msg_id: `rdb-${n}` });
  for (let n = 0; n < 4; n++) assert.equal((await post(n)).status, 201);

  const filler = await fill(disk);
  await admin.bgsave();
  await waitUntil('the snapshot failed', async () => /^rdb_last_bgsave_status:err\r?$/m.test(await admin.info('persistence')), 10_000);
  const rdbFailed = /^Redis refuses writes: its last RDB snapshot \(background save\) failed and stop-writes-on-bgsave-error is on \(Redis's log says why, a full disk\?; it takes writes again once a BGSAVE succeeds\)/;
  expectError(await post(10), 503, 'UNAVAILABLE', rdbFailed);
  expectError(await client.get('/readyz'), 503, 'UNAVAILABLE', rdbFailed);

  await rm(filler);
  await admin.bgsave();
  await waitUntil('/readyz is 200 again', async () => (await client.get('/readyz')).status === 200, 10_000);
  assert.equal((await post(11)).status, 201);
});
