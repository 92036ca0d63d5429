/**
 * The node's renewals — its store lease and its registration — go on a Redis
 * connection of their own (`pixiu:renewals`, src/service/redis-start.ts), never behind
 * client traffic on the command connection (slowclient F1: behind a reconnect herd's
 * thousands of commands the lease's renewal timed out and the node's writes were
 * fenced). The command connection is made to answer late through a proxy
 * (test/harness/lag-proxy.ts: every reply 3 s late, past the 1 s command timeout, as a
 * connection backed up by a burst): the lease and the registration are renewed all the
 * same, and no renewal fails. And the renewals' commands may take a renewal period, not
 * the command timeout: with the event loop held 1.2 s at a time in its I/O phase (a
 * flood of pipelined requests, slowclient F6), each reply is read after a 1 s timer
 * would have fired; the lease is confirmed all the same, and writes are never fenced.
 */
import { once } from 'node:events';
import net from 'node:net';
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

/** A node started on `redisUrl` (through a proxy, or not) with a 1 s command timeout, watched from `serverUrl`. */
async function watchedNode(steps: ReturnType<typeof cleanupList>, serverUrl: string, redisUrl: string): Promise<{
  lines: ReturnType<typeof capturingLogger>['lines']; renewal: () => Promise<number>; registered: () => Promise<number>;
}> {
  const { redis: admin } = await openInbox(steps, serverUrl);
  const { logger, lines } = capturingLogger();
  const keys = new Keys('px:');
  await startInProcess(steps, { redisUrl, redisCommandTimeoutMs: '1000' }, logger);
  const store = lines.find((l) => l.msg === 'store lease held')?.store;
  assert.equal(typeof store, 'string');
  return {
    lines,
    // The lease's renewal count, moved on by each renewal.
    renewal: async () => (JSON.parse(await admin.get(keys.storeLease(store as string)) ?? '{}') as { renewal?: number }).renewal ?? 0,
    // The node's registration expiry (the only node): moved on by each renewal.
    registered: async () => Number((await admin.zrange(keys.nodes(), '0', '-1', 'WITHSCORES'))[1] ?? 0),
  };
}

test('with the command connection answering 3 s late, the store lease and the node registration are still renewed, and no renewal fails', { timeout: 120_000 }, async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const server = await RedisServer.start();
  steps.after(() => server.destroy());
  const proxy = await LagProxy.start({ host: '127.0.0.1', port: server.port }, COMMAND_CONNECTION);
  steps.after(() => proxy.close());
  const { lines, renewal, registered } = await watchedNode(steps, server.url, proxy.url);

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

/**
 * Holds this process's event loop `holdMs` at a time in its I/O phase (the thread
 * blocked in `Atomics.wait`), as a node parsing a flood of pipelined requests does: a
 * local socket echoes one byte back and forth, and each arrival is held. A reply Redis
 * sends meanwhile misses that poll of the loop, and the timers run before the next one
 * reads it. Answers how to stop.
 */
async function holdLoop(holdMs: number): Promise<() => void> {
  const server = net.createServer((s) => s.on('data', (b) => s.write(b)));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  await once(client, 'connect');
  let on = true;
  // The thread blocked, as by a flood's parsing, without burning a core meanwhile: the
  // loop runs nothing for `holdMs` either way (a spin on performance.now() burned ~5 s
  // of CPU a run that the suite's other files wanted).
  const held = new Int32Array(new SharedArrayBuffer(4));
  client.on('data', () => {
    Atomics.wait(held, 0, 0, holdMs);
    if (on) client.write('x');
  });
  client.write('x');
  return () => {
    on = false;
    client.destroy();
    server.close();
  };
}

test('with the event loop held 1.2 s at a time (a flood of requests), past the 1 s command timeout, the renewals still confirm the lease and none fails', { timeout: 120_000 }, async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const server = await RedisServer.start();
  steps.after(() => server.destroy());
  const { lines, renewal } = await watchedNode(steps, server.url, server.url);
  const heldAt = lines.length;
  const before = await renewal();
  // The admin's own commands share the held loop; its timeout is the harness default.
  const release = await holdLoop(1200);
  try {
    await waitUntil('two lease renewals while the loop is held', async () => await renewal() >= before + 2, 6 * LEASE_RENEW_MS, 100);
  } finally {
    release();
  }
  const failed = lines.slice(heldAt).filter((l) => /renewal failed|writes' deadline passed|suspended/.test(l.msg ?? ''));
  assert.deepEqual(failed.map((l) => l.msg), [], 'no renewal failed and the writes were never fenced');
});
