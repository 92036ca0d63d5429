/**
 * An inbox Redis gave back with less (a restored snapshot, a failover to a replica that
 * was behind) while no device of the user was connected (DESIGN.md §11). The first
 * device to come back presents a `last_seq` above the inbox's latest under the same
 * epoch; the node replaces the epoch, as it does when a read under a live connection
 * finds the inbox shrunken (docs/decisions.md, "Redis with less than it had"). Before,
 * only that device was reset and the epoch kept: the lost seqs were assigned again to
 * new messages, and another offline device resuming with its old-epoch `last_seq` inside
 * the lost range was sent only what came after it, skipping the new ones silently.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { openInbox } from '../harness/checks.js';
import { expectFrame, expectMsgs, expectWelcome, postMany, startDelivery, waitCursor } from '../gateway/delivery-fixture.js';

test('a device resuming above the latest seq of its own epoch (the inbox came back with less) gets a new epoch, so another offline device of the old epoch is reset, not silently skipped', async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { gw: server } = await startDelivery(steps, 'rv1', { redisUrl: own.url });
  const { redis: raw, inbox } = await openInbox(steps, own.url, 'rv1:');
  const user = 'olga';
  const keys = inbox.keys.user(user);
  const names = [keys.inbox, keys.meta, keys.ids, keys.acks];

  const kept = await postMany(server.client, user, 3);
  const dumps = await Promise.all(names.map((k) => raw.dumpBuffer(k)));
  const lost = await postMany(server.client, user, 2, 4);

  // Tablet reads and acks 1..5, phone reads 1..4; both go offline.
  const tablet = await server.connect(user, { device: 'tablet' });
  const w = await expectWelcome(tablet, 1, 5);
  const epoch = w.epoch as string;
  await expectMsgs(tablet, 1, 5, [...kept, ...lost]);
  await waitCursor(inbox, user, 'tablet', 5);
  await tablet.close();
  const phone = await server.connect(user, { device: 'phone' });
  await expectWelcome(phone, 1, 5);
  await expectMsgs(phone, 1, 4, [...kept, ...lost]);
  await phone.close();

  // Redis gives the keys back as they were after seq 3 (same epoch, latest 3).
  for (const [i, key] of names.entries()) {
    const dump = dumps[i];
    if (dump === null || dump === undefined) await raw.del(key);
    else await raw.restore(key, 0, dump, 'REPLACE');
  }

  // The tablet comes back with last_seq 5 of that epoch: above the latest (3).
  const back = await server.connect(user, { device: 'tablet', params: { last_seq: 5, epoch } });
  await expectWelcome(back, 1, 3);
  const reset = await expectFrame(back, 'reset');
  assert.notEqual(reset.epoch, epoch, 'the tablet is reset under a new epoch');
  await expectMsgs(back, 1, 3, kept);
  await back.close();

  // Two new messages take seqs 4 and 5 again.
  const fresh = await postMany(server.client, user, 2, 4);

  // The phone comes back with last_seq 4 of the old epoch: it must not be sent seq 5
  // alone (that would skip the new seq 4 without a signal).
  const phone2 = await server.connect(user, { device: 'phone', params: { last_seq: 4, epoch } });
  await expectFrame(phone2, 'welcome');
  const next = await phone2.next();
  assert.equal(next.t, 'reset', `the phone (last_seq 4 of the old epoch) must be reset; got ${JSON.stringify(next)} — the new seq 4 (${fresh[0]}) was skipped`);
});
