/**
 * `pixiu_ws_closes_total{code}` (docs/api.md "Operations"): its label values must be a
 * bounded set the server knows, not whatever a client puts in its close frame. A client
 * may close with any code of 1000–1014 or 3000–4999 (RFC 6455 §7.4.2), so counting the
 * peer's code as is lets any client with a token mint ~2,000 series per node (and each
 * one is kept for the life of the process).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { waitUntil } from '../harness/checks.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { closesByCode, startGateway, type GatewayFixture } from './gateway-fixture.js';

let redis: RedisServer;
let gw: GatewayFixture;
const cleanup = cleanupList();

before(async () => {
  redis = await RedisServer.start();
  gw = await startGateway(cleanup, { redisUrl: redis.url });
});

after(async () => {
  try {
    await cleanup.run();
  } finally {
    await redis?.destroy();
  }
});

test('close codes chosen by clients do not each become a pixiu_ws_closes_total series', async () => {
  const codes = [3000, 3001, 3999, 4321, 4777, 4998];
  const total = (counts: Record<string, number>): number => Object.values(counts).reduce((a, b) => a + b, 0);
  const earlier = await closesByCode(gw);
  for (const code of codes) {
    const { client } = await gw.connectWelcomed(`closer-${code}`);
    client.ws.close(code, 'bye');
    await client.closed;
  }
  // Every close is counted once its connection is gone on the server too.
  await waitUntil('the six closes are counted', async () => total(await closesByCode(gw)) >= total(earlier) + codes.length);
  const counts = await closesByCode(gw);
  const minted = codes.map(String).filter((c) => c in counts);
  assert.deepEqual(minted, [], `client-chosen close codes became label values: ${Object.keys(counts).join(', ')}`);
  assert.equal(counts.other, (earlier.other ?? 0) + codes.length, 'each is counted as other');
});
