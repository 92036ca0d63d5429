/**
 * One `reset` per epoch change per device, on the node that did not make the new epoch
 * (DESIGN.md §6 `reset`, §11; docs/decisions.md "Redis with less than it had"). Two nodes
 * on one Redis: the tablet is on B. A client's claim on A (a `last_seq` above the latest
 * under the inbox's own epoch) gives the inbox a new epoch there, and starts the cool-down.
 * B has not read the inbox since. The same client, taking the `reset`'s epoch but keeping
 * its `last_seq` (the looping client of rollback-at-login.test.ts), comes to B: B's read
 * shows the new epoch, so the tablet is reset to it, and the claim asks for a rotation,
 * which the cool-down refuses. Before, B dropped that page for the rotation and kept the
 * old epoch, and the read after the refusal reset the tablet a second time, back to back,
 * for the same epoch (a verifier's finding). Real Redis, two in-process services.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { expectFrame, expectMsgs, expectWelcome, framesUpToPong, postMany } from './delivery-fixture.js';
import { startGateway } from './gateway-fixture.js';

test('a device on the node that did not make the new epoch is reset once, also when a claim there is refused by the cool-down', async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  // Notifies off: B is not asked to read at A's rotation (src/gateway/rotation-wake.ts),
  // so B's first read of the new epoch is the claim's own, the case this test is about.
  const settings = { redisUrl: own.url, redisPrefix: 'r1n:', storeDurability: 'relaxed' as const, notify: 'off' };
  const a = await startGateway(steps, settings);
  const b = await startGateway(steps, settings);
  const user = 'ruth';
  const ids = await postMany(a.client, user, 5);

  const tablet = await b.connect(user, { device: 'tablet' });
  const e0 = (await expectWelcome(tablet, 1, 5)).epoch as string;
  await expectMsgs(tablet, 1, 5, ids);

  // On A: a claim above the latest under e0 makes a new epoch (the cool-down starts).
  const phone = await a.connect(user, { device: 'phone', params: { last_seq: 6, epoch: e0 } });
  await expectWelcome(phone, 1, 5);
  const e1 = (await expectFrame(phone, 'reset')).epoch as string;
  assert.notEqual(e1, e0);
  await phone.close();

  // On B, with the new epoch and the old last_seq: its read shows e1; its claim is refused.
  const again = await b.connect(user, { device: 'phone', params: { last_seq: 6, epoch: e1 } });
  await expectWelcome(again, 1, 5);
  assert.deepEqual(await again.next(), { t: 'reset', epoch: e1, seq: 5 }, 'reset alone, to the epoch kept');
  await expectMsgs(again, 1, 5, ids);

  const seen = await framesUpToPong(tablet);
  const resets = seen.filter((f) => f.t === 'reset');
  assert.deepEqual(resets, [{ t: 'reset', epoch: e1, seq: 5 }], `one reset for one epoch change: ${resets.length}`);
  assert.deepEqual(seen.filter((f) => f.t === 'msg').map((f) => f.id), ids, 'the inbox sent again once');
});
