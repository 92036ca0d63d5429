/**
 * The service on a full disk: POSTs are answered 503 UNAVAILABLE and `/readyz` says why
 * (a store partition reopening its database after a failed write), so a load balancer
 * sends producers elsewhere; once the disk has room again the partition reopens, `/readyz`
 * is 200 and POSTs are taken. (That nothing acknowledged is lost on the way is
 * test/store/disk-full.test.ts.) The failed write is counted in `/metrics`. A batch's
 * items refused meanwhile are one warning, not an error per item. A real full disk: a small tmpfs, root only.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { loadConfig } from '../../src/config/config.js';
import { startService } from '../../src/service/service.js';
import { expectError, waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { RedisServer } from '../harness/redis-server.js';
import { PixiuClient } from '../harness/pixiu-server.js';
import { fill, smallDisk } from '../harness/small-disk.js';

test('on a full disk POSTs get 503 and /readyz names the reopening partition; with room again both recover', async (t) => {
  const disk = await smallDisk(t, '3m');
  if (disk === undefined) {
    t.skip('no right to mount a tmpfs');
    return;
  }
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const { logger, lines } = capturingLogger();
  const config = loadConfig({}, { port: '0', claimsSettleMs: '0', redisUrl: redis.url, dataDir: path.join(disk, 'data') });
  const service = await startService(config, logger);
  t.after(() => service.close());
  const client = new PixiuClient(service.url, service.secrets.apiToken);
  const post = (n: number) => client.post('/v1/messages', { to: `u${n % 8}`, type: 't', data: 'x'.repeat(2000) });
  assert.equal((await post(0)).status, 201);
  assert.equal((await client.get('/readyz')).status, 200);
  assert.equal(await writeFailures(client), 0);

  const filler = await fill(disk);
  let n = 1;
  let answer = await post(n++);
  while (answer.status === 201 && n < 2_000) answer = await post(n++);
  // The write that takes the partition out says why, in /readyz's words (walk16 F3.1).
  expectError(answer, 503, 'UNAVAILABLE', /^message store partition \d+ is reopening its database after a failed write \(No space left on device\)$/);
  // Only that partition's messages are refused: /readyz names it, not the whole store.
  expectError(await client.get('/readyz'), 503, 'UNAVAILABLE',
    /^message store partitions? [\d, ]+ takes? no messages now \(no write failed or stalled yet on this node's other \d+ partitions\): message store partition \d+ is reopening its database after a failed write \(No space left on device\)/);
  assert.ok(await writeFailures(client) >= 1, 'the failed write is counted in /metrics');
  // A batch while the disk is full: its items are 503s, logged as one warning for the
  // batch, not an error with a stack per item.
  const from = lines.length;
  const batch = await client.post('/v1/messages/batch', { messages: Array.from({ length: 200 }, (_, i) => ({ to: `b${i}`, type: 't', data: i })) });
  assert.equal(batch.status, 200, batch.text);
  // (A partition that has not failed yet may still fit a few small records in its log's
  // last page; one that failed takes none, and 200 items reach every partition.)
  const refused = (batch.body as { results: { status: number }[] }).results.filter((r) => r.status === 503).length;
  assert.ok(refused >= 1, batch.text);
  const logged = lines.slice(from);
  assert.deepEqual(logged.filter((l) => l.msg === 'batch item failed'), []);
  assert.deepEqual(logged.filter((l) => l.msg === 'batch items unavailable').map((l) => [l.level, l.items]), [[40, refused]]);

  await rm(filler);
  await waitUntil('/readyz is 200 again', async () => (await client.get('/readyz')).status === 200, 20_000);
  for (let i = 0; i < 16; i++) assert.equal((await post(n++)).status, 201, 'every partition takes messages again');
});

/** `pixiu_store_write_failures_total` from the node's /metrics. */
async function writeFailures(client: PixiuClient): Promise<number> {
  const text = (await client.get('/metrics')).text;
  return Number(/^pixiu_store_write_failures_total (\S+)$/m.exec(text)?.[1] ?? Number.NaN);
}
