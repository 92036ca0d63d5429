/**
 * `DELETE /v1/users/{uid}/connections` while the node holding one of the connections
 * has its Redis link blackholed (TCP open both ways, nothing passing: Redis still counts
 * its subscriber, so the kick's PUBLISH is "received" and not sent again), then the link
 * is reset (what Redis had pushed to the node, the kick included, is lost) and passes
 * again. The node cannot tell the entry the DELETE removed from one Redis lost; it wrote
 * it back, and the connection stayed open for good, listed online again (the
 * network-fault tester's kick2). The DELETE marks the connections it closed
 * (presence-close-1.lua), and the node's refresh after the heal finds the mark and
 * closes the connection 1008 instead (presence-refresh-4.lua).
 *
 * Node A reaches Redis directly; node B through test/harness/blackhole-proxy.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { openInbox, waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { BlackholeProxy } from '../harness/blackhole-proxy.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { Keys } from '../../src/redis/keys.js';
import { startGateway, type GatewayFixture } from './gateway-fixture.js';

let a: GatewayFixture;
let b: GatewayFixture;
let proxy: BlackholeProxy;
let probe: Redis;
/** B's log. */
let bLines: LogLine[];

fileRedis(async ({ redis, cleanup }) => {
  proxy = await BlackholeProxy.start({ host: '127.0.0.1', port: redis.port });
  cleanup.after(() => proxy.close());
  a = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed' });
  const captured = capturingLogger();
  bLines = captured.lines;
  b = await startGateway(cleanup, { redisUrl: proxy.url, storeDurability: 'relaxed' }, captured.logger);
  probe = (await openInbox(cleanup, redis.url)).redis;
});

/** The connections `user`'s presence lists, as node A answers it. */
async function connections(user: string): Promise<Array<{ conn: string; device: string; node: string }>> {
  const { body } = await a.client.request('GET', `/v1/users/${user}/presence`);
  return (body as { connections: Array<{ conn: string; device: string; node: string }> }).connections;
}

/** The conns `user`'s presence lists, as node A answers it. */
async function listed(user: string): Promise<string[]> {
  return (await connections(user)).map((c) => c.conn);
}

test('a DELETE whose kick the node lost in a blackhole reset closes its connection 1008 once the link is back, after its registration lapsed, and it is not listed again', { timeout: 90_000 }, async (t) => {
  const { client: onB } = await b.connectWelcomed('cut-off', { device: 'a' });
  const { client: onA } = await a.connectWelcomed('cut-off', { device: 'b' });
  await waitUntil('both connections listed', async () => (await listed('cut-off')).length === 2);
  const bNode = (await connections('cut-off')).find((c) => c.device === 'a')?.node ?? '';

  proxy.blackhole();
  const answer = await a.client.request('DELETE', '/v1/users/cut-off/connections');
  assert.deepEqual(answer.body, { user: 'cut-off', closed: 2 });
  assert.deepEqual(await onA.waitClose(5000), { code: 1008, reason: 'disconnected by the service' });
  assert.deepEqual(await listed('cut-off'), []);

  // As in the tester's run, B stays cut off past its registration's lifetime (15 s), so
  // that the heal is a lapse and a write-back of all its presence.
  const nodes = new Keys('px:').nodes();
  await waitUntil('B\'s registration lapsed', async () => {
    const [sec] = await probe.time();
    const expiry = await probe.zscore(nodes, bNode);
    return expiry === null || Number(expiry) <= Number(sec) * 1000;
  }, 30_000, 200);

  proxy.reset();
  const healedAt = performance.now();
  await waitUntil('B wrote its presence back', async () => bLines.some((l) => String(l.msg).includes('written back')), 15_000);
  assert.deepEqual(await onB.waitClose(8000), { code: 1008, reason: 'disconnected by the service' });
  t.diagnostic(`closed ${Math.round(performance.now() - healedAt)} ms after the reset`);
  assert.ok(bLines.some((l) => l.msg === 'connection closed on its presence refresh: a disconnect this node missed'));
  assert.deepEqual(await listed('cut-off'), []);
});
