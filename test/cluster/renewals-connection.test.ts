/**
 * The node's renewals — its store lease and its registration — go on a Redis
 * connection of their own (`pixiu:renewals`, src/service/redis-start.ts), never behind
 * client traffic on the command connection (slowclient F1: behind a reconnect herd's
 * thousands of commands the lease's renewal timed out and the node's writes were
 * fenced). The command connection is made to answer late through a proxy
 * (test/harness/lag-proxy.ts: every reply 3 s late, past the 1 s command timeout, as a
 * connection backed up by a burst): the lease and the registration are renewed all the
 * same, and no renewal fails.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LEASE_RENEW_MS } from '../../src/cluster/lease-watch.js';
import { Keys } from '../../src/redis/keys.js';
import { openInbox, waitUntil } from '../harness/checks.js';
import { LagProxy } from '../harness/lag-proxy.js';
import { capturingLogger } from '../harness/log-capture.js';
import { cleanupList, startInProcess } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

/** What the command connection (named `pixiu`, no more) sends on connecting: `CLIENT SETNAME pixiu`. */
const COMMAND_CONNECTION = '$7\r\nsetname\r\n$5\r\npixiu\r\n';

test('with the command connection answering 3 s late, the store lease and the node registration are still renewed, and no renewal fails', { timeout: 120_000 }, async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const server = await RedisServer.start();
  steps.after(() => server.destroy());
  const proxy = await LagProxy.start({ host: '127.0.0.1', port: server.port }, COMMAND_CONNECTION);
  steps.after(() => proxy.close());
  const { redis: admin } = await openInbox(steps, server.url);
  const { logger, lines } = capturingLogger();
  const keys = new Keys('px:');
  await startInProcess(steps, { redisUrl: proxy.url, redisCommandTimeoutMs: '1000' }, logger);
  const store = lines.find((l) => l.msg === 'store lease held')?.store;
  assert.equal(typeof store, 'string');
  const renewal = async (): Promise<number> => (JSON.parse(await admin.get(keys.storeLease(store as string)) ?? '{}') as { renewal?: number }).renewal ?? 0;
  // The node's registration expiry (the only node): moved on by each renewal.
  const registered = async (): Promise<number> => Number((await admin.zrange(keys.nodes(), '0', '-1', 'WITHSCORES'))[1] ?? 0);

  proxy.lag(3000);
  const laggedAt = lines.length;
  const [renewalBefore, registeredBefore] = [await renewal(), await registered()];
  // Two renewal periods: each renewal of either would have timed out on the command connection.
  await waitUntil('two lease renewals while the command connection lags', async () => await renewal() >= renewalBefore + 2, 4 * LEASE_RENEW_MS, 100);
  assert.ok(await registered() > registeredBefore, 'the node registration was renewed');
  const failed = lines.slice(laggedAt).filter((l) => /renewal failed/.test(l.msg ?? ''));
  assert.deepEqual(failed.map((l) => l.msg), [], 'no renewal failed');
  proxy.lag(0);
  await proxy.settled();
});
