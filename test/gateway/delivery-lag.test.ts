/**
 * `pixiu_delivery_lag_seconds` (docs/api.md "Operations"; an on-call SRE's finding: no
 * metric of how long messages take to reach devices): one observation per live
 * delivery — a `msg` written for the first time to a device connected when its message
 * was appended —, of the time from the message's `ts` to the write. A device's
 * catch-up on connecting and redeliveries are not observed. Scraped before and after
 * real traffic on a real socket: exact counts.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { metricSample } from '../harness/checks.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { startGateway, type GatewayFixture } from './gateway-fixture.js';

let redis: RedisServer;
let gw: GatewayFixture;
const cleanup = cleanupList();

before(async () => {
  redis = await RedisServer.start();
  // A short ack timeout: an unacked message is redelivered within a second.
  gw = await startGateway(cleanup, { redisUrl: redis.url, ackTimeoutMs: '300ms', redeliveryBackoffMs: '300ms,300ms,300ms,300ms' });
});

after(async () => {
  await cleanup.run();
  await redis?.destroy();
});

/** The histogram's count and sum (seconds) as scraped now. */
async function lag(): Promise<{ count: number; sum: number; under60: number }> {
  const text = (await gw.client.get('/metrics')).text;
  const read = (series: string): number => {
    const v = metricSample(text, series);
    assert.notEqual(v, undefined, `${series} is scraped`);
    return v as number;
  };
  return { count: read('pixiu_delivery_lag_seconds_count'), sum: read('pixiu_delivery_lag_seconds_sum'), under60: read('pixiu_delivery_lag_seconds_bucket{le="60"}') };
}

test('each live delivery is observed once, with the time from its ts to the write', async () => {
  const { client } = await gw.connectWelcomed('lag-live', { device: 'd1' });
  const before = await lag();
  const postedAt = Date.now();
  await gw.post('lag-live', 3);
  const frames = await client.msgs(3, { ack: true });
  const done = Date.now();
  const now = await lag();
  assert.equal(now.count - before.count, 3);
  assert.equal(now.under60 - before.under60, 3);
  // Each lag lies between 0 and the time from its ts (set before the POST answered) to the frame's arrival.
  const bound = frames.reduce((s, f) => s + (done - (f.ts as number)) / 1000, 0);
  assert.ok(now.sum - before.sum >= 0 && now.sum - before.sum <= bound + 0.01, `sum grew ${now.sum - before.sum} s, bound ${bound} s`);
  assert.ok(frames.every((f) => (f.ts as number) >= postedAt - 1000), 'the ts of each message is its ingest time');
  await client.close();
});

test('catch-up on connecting is not observed: messages appended before the welcome', async () => {
  await gw.post('lag-away', 2);
  const before = await lag();
  const { client, welcome } = await gw.connectWelcomed('lag-away', { device: 'd1' });
  assert.equal(welcome.seq, 2);
  await client.msgs(2, { ack: true });
  // One live delivery after them, to know the scrape follows every write above.
  await gw.post('lag-away', 1);
  await client.msgs(1, { ack: true });
  assert.equal((await lag()).count - before.count, 1, 'only the message appended while connected');
  await client.close();
});

test('a redelivery is not observed again', async () => {
  const { client } = await gw.connectWelcomed('lag-redeliver', { device: 'd1' });
  const before = await lag();
  await gw.post('lag-redeliver', 1);
  const [first] = await client.msgs(1);
  assert.equal(first?.redelivered, undefined);
  const again = await client.nextOf('msg');
  assert.equal(again.redelivered, true);
  assert.equal(again.seq, first?.seq);
  client.ack(again.seq as number);
  assert.equal((await lag()).count - before.count, 1, 'the first send alone');
  await client.close();
});
