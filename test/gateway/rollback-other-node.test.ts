/**
 * Redis gives a user's inbox back with less under the same epoch (a restored snapshot, a
 * failover to a replica behind: DESIGN.md §11) while the device is on node A, and the
 * appends that take the lost seqs again are made on node B, one request each, passing
 * the highest seq A knows before A reads again. B's notify to A carried only the seq:
 * A, pulling after its device's position, read only the message past it — the lost
 * messages stayed the device's at 4 and 5, the new ones never shown, no `reset` (the
 * delivfix model review, two nodes: seeds 407, 875, 1249, 1593, 1636, 1945). Now the
 * notify carries the MsgID (src/cluster/bus.ts), and A checks it against the seqs it
 * delivered (epoch-guard.ts `reuses`): another message at 4 proves the loss, a new
 * epoch, the device reset and sent 1..6 as they are. Real Redis (a private
 * redis-server), two in-process services on it; A reaches Redis through a proxy that
 * delays its bus subscriber (test/harness/lag-proxy.ts), so that B's notifies reach A
 * only after B's three appends, whatever the machine's speed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RedisServer } from '../harness/redis-server.js';
import { LagProxy } from '../harness/lag-proxy.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { openInbox } from '../harness/checks.js';
import { expectFrame, expectMsgs, expectWelcome, postMany, postOne, snapshotInbox } from './delivery-fixture.js';
import { startGateway } from './gateway-fixture.js';

test('appends on node B take the seqs Redis lost, one request each, past the highest seq node A delivered before A hears of them: the notify\'s MsgID at 4 proves the loss, the device on A is reset and gets 1..6', async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const proxy = await LagProxy.start({ host: '127.0.0.1', port: own.port }, 'pixiu:bus:');
  steps.after(() => proxy.close());
  const settings = { redisPrefix: 'ron:', storeDurability: 'relaxed' as const };
  const a = await startGateway(steps, { ...settings, redisUrl: proxy.url });
  const b = await startGateway(steps, { ...settings, redisUrl: own.url });
  const { redis: raw, inbox } = await openInbox(steps, own.url, 'ron:');
  const user = 'olga';

  const kept = await postMany(a.client, user, 3);
  const restore = await snapshotInbox(raw, inbox.keys.user(user));
  const lost = await postMany(a.client, user, 2, 4);
  const phone = await a.connect(user, { device: 'phone' });
  const epoch = (await expectWelcome(phone, 1, 5)).epoch as string;
  await expectMsgs(phone, 1, 5, [...kept, ...lost]);

  await restore(); // latest 3, same epoch
  proxy.lag(1_000); // A hears B's notifies late
  const again = [await postOne(b.client, user), await postOne(b.client, user), await postOne(b.client, user)];
  assert.deepEqual(again.map((m) => m.seq), [4, 5, 6], 'B took 4 and 5 again, then 6');
  assert.equal((await inbox.range(user, 0, 1)).epoch, epoch, 'the same epoch: nothing has seen the loss yet');
  proxy.lag(0);

  const reset = await expectFrame(phone, 'reset', 10_000);
  assert.notEqual(reset.epoch, epoch, 'before: no reset, msg 6 alone (the device kept the lost 4 and 5)');
  assert.equal(reset.seq, 6);
  await expectMsgs(phone, 1, 6, [...kept, ...again.map((m) => m.id)]);
});
