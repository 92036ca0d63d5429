/**
 * A rotation made on one node resets the user's connections on another node at once
 * (docs/protocol.md "Where delivery starts", case 2; src/gateway/rotation-wake.ts). Two
 * nodes on one Redis: a tablet (its window full, nothing acked) and a laptop (all acked)
 * of the user are on B. The phone connects to A with a `last_seq` above the latest under
 * the inbox's own epoch: A gives the inbox a new epoch and asks B, over the bus, to read
 * it. Heartbeat and ack timeout are a minute, so only that request explains a `reset`
 * on B within two seconds; before, B's connections were reset only at B's next read of
 * the inbox (the black-box walk17's finding: 10–18 s there). Real Redis, two in-process services.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { expectFrame, expectMsgs, expectWelcome, postMany } from './delivery-fixture.js';
import { startGateway } from './gateway-fixture.js';

test('a rotation on node A resets the connections of the user on node B at once, a full window too', async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const settings = {
    redisUrl: own.url, redisPrefix: 'rwake:', storeDurability: 'relaxed' as const,
    deliveryWindow: '3', heartbeatMs: '60s', idleTimeoutMs: '120s', ackTimeoutMs: '60s',
  };
  const a = await startGateway(steps, settings);
  const b = await startGateway(steps, settings);
  const user = 'wren';
  const ids = await postMany(a.client, user, 5);

  const tablet = await b.connect(user, { device: 'tablet' });
  const e0 = (await expectWelcome(tablet, 1, 5)).epoch as string;
  await expectMsgs(tablet, 1, 3, ids, 1, { ackEvery: 0 }); // its window is full: no more without an ack
  const laptop = await b.connect(user, { device: 'laptop' });
  await expectWelcome(laptop, 1, 5);
  await expectMsgs(laptop, 1, 5, ids);

  const phone = await a.connect(user, { device: 'phone', params: { last_seq: 6, epoch: e0 } });
  await expectWelcome(phone, 1, 5);
  const e1 = (await expectFrame(phone, 'reset')).epoch as string;
  assert.notEqual(e1, e0);

  for (const [name, c] of [['tablet', tablet], ['laptop', laptop]] as const) {
    const reset = await c.next(2000).catch(() => assert.fail(`no frame on B's ${name} within 2 s of the rotation on A`));
    assert.deepEqual(reset, { t: 'reset', epoch: e1, seq: 5 }, `B's ${name} is reset to the new epoch`);
  }
});
