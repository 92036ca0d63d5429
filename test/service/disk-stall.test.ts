/**
 * The service on a stalled disk (a frozen file system; a dying disk or a network
 * volume's hiccup behaves alike): a POST whose store write does not return within
 * PIXIU_STORE_WRITE_TIMEOUT is answered 503 UNAVAILABLE with Retry-After, `/readyz` is
 * 503 naming the stalled partition, and a POST to that partition meanwhile is refused at
 * once rather than queued; once the disk is back `/readyz` is 200 again and the retry
 * with the same client_msg_id completes the message once. Before, every POST waited as
 * long as the disk did and `/readyz` said ready (a reviewer's finding). A real stalled
 * disk: an ext4 loop device, frozen (root only; test/harness/frozen-disk.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { loadConfig } from '../../src/config/config.js';
import { startService } from '../../src/service/service.js';
import { expectError, waitUntil, within } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { RedisServer } from '../harness/redis-server.js';
import { PixiuClient } from '../harness/pixiu-server.js';
import { freezableDiskOrSkip } from '../harness/frozen-disk.js';

test('a POST held by a stalled store write is 503 after PIXIU_STORE_WRITE_TIMEOUT, /readyz names the partition, and the retry completes it once', async (t) => {
  const disk = await freezableDiskOrSkip(t);
  if (disk === undefined) return;
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const { logger, lines } = capturingLogger();
  const config = loadConfig({}, {
    port: '0', claimsSettleMs: '0', redisUrl: redis.url, dataDir: path.join(disk.dir, 'data'), storeWriteTimeoutMs: '500ms',
  });
  const service = await startService(config, logger);
  disk.beforeUnmount(() => service.close());
  const client = new PixiuClient(service.url, service.secrets.apiToken);
  const message = { to: 'alice', type: 't', data: 'hello', client_msg_id: 'stalled-1' };
  assert.equal((await client.post('/v1/messages', { ...message, client_msg_id: 'before' })).status, 201);
  assert.equal((await client.get('/readyz')).status, 200);

  disk.freeze();
  const held = await within(5_000, 'a POST on the stalled disk', client.post('/v1/messages', message));
  expectError(held, 503, 'UNAVAILABLE', /^message store partition \d+ has had a write in flight for over 500 ms \(PIXIU_STORE_WRITE_TIMEOUT; a stalled disk\?\)/);
  assert.equal(held.headers.get('retry-after'), '1');
  const partition = /partition (\d+)/.exec(held.text)?.[1];
  expectError(await within(5_000, '/readyz', client.get('/readyz')), 503, 'UNAVAILABLE',
    new RegExp(`^message store partition ${partition} takes no messages now \\(no write failed or stalled yet on this node's other 7 partitions\\): message store partition ${partition} has had a write in flight`));
  // The same client_msg_id goes to the same partition: refused at once (queued, it
  // would wait as long as the disk is frozen).
  const again = await within(2_000, 'a POST to the stalled partition', client.post('/v1/messages', message));
  expectError(again, 503, 'UNAVAILABLE', /has had a write in flight/);
  assert.equal(lines.filter((l) => l.msg?.startsWith('store partition write stalled') === true && String(l.partition) === partition).length, 1);

  disk.thaw();
  await waitUntil('/readyz is 200 again', async () => (await client.get('/readyz')).status === 200);
  const retried = await client.post('/v1/messages', message);
  assert.ok(retried.status === 201 || retried.status === 200, retried.text);
  const history = await client.get('/v1/users/alice/messages');
  // The message sent before the stall, then this one, once (it carries the id the stalled write stored).
  const ids = (history.body as { messages: { id: string }[] }).messages.map((m) => m.id);
  assert.equal(ids.length, 2, history.text);
  assert.equal(ids[1], (retried.body as { id: string }).id, 'in the inbox once');
});
