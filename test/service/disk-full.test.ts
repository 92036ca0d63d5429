/**
 * The service on a full disk: POSTs are answered 503 UNAVAILABLE and `/readyz` says why
 * (a store partition reopening its database after a failed write), so a load balancer
 * sends producers elsewhere; once the disk has room again the partition reopens, `/readyz`
 * is 200 and POSTs are taken. (That nothing acknowledged is lost on the way is
 * test/store/disk-full.test.ts.) A real full disk: a small tmpfs, root only.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { expectError, waitUntil } from '../harness/checks.js';
import { RedisServer } from '../harness/redis-server.js';
import { startInProcess } from '../harness/pixiu-server.js';
import { fill, smallDisk } from '../harness/small-disk.js';

test('on a full disk POSTs get 503 and /readyz names the reopening partition; with room again both recover', async (t) => {
  const disk = await smallDisk(t, '3m');
  if (disk === undefined) {
    t.skip('no right to mount a tmpfs');
    return;
  }
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const { client } = await startInProcess(t, { redisUrl: redis.url, dataDir: path.join(disk, 'data') });
  const post = (n: number) => client.post('/v1/messages', { to: `u${n % 8}`, type: 't', data: 'x'.repeat(2000) });
  assert.equal((await post(0)).status, 201);
  assert.equal((await client.get('/readyz')).status, 200);

  const filler = await fill(disk);
  let n = 1;
  let answer = await post(n++);
  while (answer.status === 201 && n < 2_000) answer = await post(n++);
  expectError(answer, 503, 'UNAVAILABLE', /message store partition \d+ is unavailable/);
  expectError(await client.get('/readyz'), 503, 'UNAVAILABLE',
    /^the message store takes no messages now: message store partition \d+ is reopening its database after a failed write$/);

  await rm(filler);
  await waitUntil('/readyz is 200 again', async () => (await client.get('/readyz')).status === 200, 20_000);
  for (let i = 0; i < 16; i++) assert.equal((await post(n++)).status, 201, 'every partition takes messages again');
});
