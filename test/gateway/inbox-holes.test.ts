/**
 * Entries deleted by hand (XDEL) at the end of a user's inbox stream, end to end. The
 * inbox's latest seq (its counter) stays above the last entry kept; each device behind
 * it is told a `gap` of the deleted seqs. Before, neither was told until the next
 * append, and two devices at different cursors made the node read the inbox without
 * end (each read brought nothing for one of them: 1,041 reads in half a second).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { RedisServer } from '../harness/redis-server.js';
import { expectPong, type GatewayFixture } from './gateway-fixture.js';
import { expectFrame, expectMsgs, expectWelcome, postMany, postOne, startDelivery } from './delivery-fixture.js';

let redis: RedisServer;

before(async () => {
  redis = await RedisServer.start();
});

after(async () => {
  await redis?.destroy();
});

async function deliveryFetches(gw: GatewayFixture): Promise<number> {
  const text = (await gw.client.get('/metrics', { headers: { authorization: '' } })).text;
  const m = /^pixiu_delivery_fetches_total (\d+)/m.exec(text);
  assert.ok(m, 'pixiu_delivery_fetches_total is exported');
  return Number(m[1]);
}

test('seqs deleted by hand at the end of the inbox are a gap for two devices behind them, with no endless inbox reads', async (t) => {
  // Notifies off (every pull is a heartbeat's, 25 s away) and a window of 1, to set the two cursors.
  const { gw, redis: r } = await startDelivery(t, 'xdel', { redisUrl: redis.url, notify: 'off', deliveryWindow: '1' });
  const ids = await postMany(gw.client, 'xena', 2);
  const a = await gw.connect('xena', { device: 'a' });
  await expectWelcome(a, 1, 2);
  await expectMsgs(a, 1, 2, ids, 1, { ackEvery: 1 });
  const b = await gw.connect('xena', { device: 'b' });
  await expectWelcome(b, 1, 2);
  await expectMsgs(b, 1, 1, ids, 1, { ackEvery: 0 });
  // Seq 3 is appended (no notify), then an operator deletes seqs 2 and 3 from the stream.
  const third = await postOne(gw.client, 'xena');
  assert.equal(third.seq, 3);
  assert.equal(await r.xdel('xdel:{xena}:inbox', '2-0', '3-0'), 2);
  const before = await deliveryFetches(gw);
  // b's ack pulls: b is at 1, a at 2, the inbox's latest is 3 and nothing is left after 1.
  b.ack(1);
  assert.deepEqual(await expectFrame(b, 'gap', 2000), { t: 'gap', from: 2, to: 3, reason: 'trimmed' });
  assert.deepEqual(await expectFrame(a, 'gap', 2000), { t: 'gap', from: 3, to: 3, reason: 'trimmed' });
  // A ping pulls too, and its pong follows the pull: an endless loop of reads (thousands
  // a second before the fix) would have run all along the round trips.
  await expectPong(a);
  await expectPong(b);
  const reads = (await deliveryFetches(gw)) - before;
  assert.ok(reads <= 8, `${reads} inbox reads for one ack and two pings`);
  await a.close();
  await b.close();
});
