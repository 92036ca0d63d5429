/**
 * The cluster's side of `/metrics` (docs/api.md "Operations"; an on-call SRE's finding):
 * `pixiu_cluster_nodes`, the live nodes as this node's registry renewals read them
 * (every 5 s), is 2 with two nodes on one Redis and 1 once the other stops; and a
 * message posted to one node for a user connected to the other is a live delivery
 * there (notify, then a read of the inbox and of the record from its node), observed
 * once in that node's `pixiu_delivery_lag_seconds`. Two services in this process.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { metricSample, waitUntil } from '../harness/checks.js';
import { RedisServer } from '../harness/redis-server.js';
import { startInProcess, tempDataDir, type InProcessServer } from '../harness/pixiu-server.js';
import { TestClient, testToken } from '../harness/ws-client.js';
import { JWT_KEY, JWT_SECRET } from '../gateway/gateway-fixture.js';

/** One sample of a node's `/metrics`. */
async function sample(node: InProcessServer, series: string): Promise<number | undefined> {
  return metricSample((await node.client.get('/metrics')).text, series);
}

test('pixiu_cluster_nodes is 2 with two nodes and 1 once one stops; a delivery of a message posted on the other node is observed once in the lag histogram', { timeout: 90_000 }, async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const settings = { redisUrl: redis.url, redisPrefix: 'gauge:', jwtSecret: JWT_SECRET, storeDurability: 'relaxed' };
  const a = await startInProcess(t, { ...settings, dataDir: await tempDataDir(t) });
  assert.equal(await sample(a, 'pixiu_cluster_nodes'), 1, 'alone: its first registration read itself');
  const b = await startInProcess(t, { ...settings, dataDir: await tempDataDir(t) });
  // B's first renewal read A and itself; A sees B at its next renewal (within 5 s).
  assert.equal(await sample(b, 'pixiu_cluster_nodes'), 2);
  await waitUntil('A counts two nodes', async () => (await sample(a, 'pixiu_cluster_nodes')) === 2, 15_000);

  const client = await TestClient.connect(a.service.url, { token: await testToken(JWT_KEY, 'far'), params: { device: 'd1' }, timeoutMs: 20_000 });
  t.after(() => client.close());
  assert.equal((await client.next()).t, 'welcome');
  const before = await sample(a, 'pixiu_delivery_lag_seconds_count');
  const posted = await b.client.post('/v1/messages', { to: 'far', type: 'note', data: { from: 'b' } });
  assert.equal(posted.status, 201, posted.text);
  await client.msgs(1, { ack: true });
  assert.equal((await sample(a, 'pixiu_delivery_lag_seconds_count') ?? 0) - (before ?? 0), 1);
  assert.equal(await sample(b, 'pixiu_delivery_lag_seconds_count'), 0, 'B delivered nothing');

  // B deregisters as it stops: A's next renewal reads one node.
  await b.service.close();
  await waitUntil('A counts one node', async () => (await sample(a, 'pixiu_cluster_nodes')) === 1, 15_000);
});
