/**
 * A user's last connection on a node closing writes the acks it holds at once
 * (src/delivery/session.ts `logout`), not at the next round of ack writes: a device that
 * acked and left, then comes back on another node, resumes after its acks however long
 * the node's rounds are apart (PIXIU_ACK_FLUSH_INTERVAL; DESIGN.md §5).
 */
import { after, before, test } from 'node:test';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { expectPong } from './gateway-fixture.js';
import { expectMsgs, expectWelcome, postMany, startDelivery, waitCursor } from './delivery-fixture.js';

const cleanup = cleanupList();
let redis: RedisServer;

before(async () => {
  redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
});

after(() => cleanup.run());

test('the last connection of a user closing writes its acks at once, not a round later', { timeout: 60_000 }, async () => {
  // Mutant killed: no flushAcks on the last logout: the acks waited for the next
  // round, a minute here.
  const { gw: server, inbox } = await startDelivery(cleanup, 'lastout', { redisUrl: redis.url, ackFlushIntervalMs: '60000' });
  const phone = await server.connect('lou', { device: 'phone' });
  await expectWelcome(phone, 1, 0);
  const ids = await postMany(server.client, 'lou', 3);
  await expectMsgs(phone, 1, 3, ids);
  await expectPong(phone); // every ack before the ping was applied
  await phone.close();
  await waitCursor(inbox, 'lou', 'phone', 3, 5_000);
});
