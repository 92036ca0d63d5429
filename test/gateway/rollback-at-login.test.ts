/**
 * An inbox Redis gave back with less (a restored snapshot, a failover to a replica that
 * was behind) while no device of the user was connected (DESIGN.md §11). The first
 * device to come back presents a `last_seq` above the inbox's latest under the same
 * epoch; the node replaces the epoch, as it does when a read under a live connection
 * finds the inbox shrunken (docs/decisions.md, "Redis with less than it had"). Before,
 * only that device was reset and the epoch kept: the lost seqs were assigned again to
 * new messages, and another offline device resuming with its old-epoch `last_seq` inside
 * the lost range was sent only what came after it, skipping the new ones silently.
 *
 * A client's mistake looks the same (a mobile tester's finding: an SDK that takes a
 * `reset`'s epoch but keeps its old `last_seq` claims ahead again at every reconnect;
 * 52 loops in 10 s reset each of the user's other devices 52 times). Such a rotation is
 * made at most once per user per cool-down (epoch-guard.ts RESUME_ROTATION_COOLDOWN_MS,
 * enforced in Redis by rotate-7.lua); a claim within it resets the claiming device alone.
 * A loss the node's own deliveries prove still rotates, cool-down or not.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { openInbox } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { expectFrame, expectMsgs, expectWelcome, framesUpToPong, postMany, snapshotInbox, startDelivery, waitCursor } from '../gateway/delivery-fixture.js';

test('a device resuming above the latest seq of its own epoch (the inbox came back with less) gets a new epoch, so another offline device of the old epoch is reset, not silently skipped', async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { gw: server } = await startDelivery(steps, 'rv1', { redisUrl: own.url });
  const { redis: raw, inbox } = await openInbox(steps, own.url, 'rv1:');
  const user = 'olga';
  const keys = inbox.keys.user(user);

  const kept = await postMany(server.client, user, 3);
  const restore = await snapshotInbox(raw, keys);
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
  await restore();

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

test('a client that claims a last_seq ahead under the current epoch in a reconnect loop is reset alone after the first rotation: the user\'s other device gets one reset; a loss the deliveries prove still resets every device', async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { logger, lines } = capturingLogger();
  const { gw: server } = await startDelivery(steps, 'rl1', { redisUrl: own.url }, logger);
  const { redis: raw, inbox } = await openInbox(steps, own.url, 'rl1:');
  const user = 'lupe';
  const ids = await postMany(server.client, user, 5);

  // The tablet is connected and caught up.
  const tablet = await server.connect(user, { device: 'tablet' });
  const e0 = (await expectWelcome(tablet, 1, 5)).epoch as string;
  await expectMsgs(tablet, 1, 5, ids);

  // The looping client: takes each reset's epoch but keeps its last_seq, 6, above the latest (5).
  let epoch = e0;
  const loops = 6;
  for (let i = 0; i < loops; i++) {
    const phone = await server.connect(user, { device: 'phone', params: { last_seq: 6, epoch } });
    await expectWelcome(phone, 1, 5);
    const reset = await expectFrame(phone, 'reset');
    if (i === 0) assert.notEqual(reset.epoch, e0, 'the first claim rotates the epoch');
    else assert.equal(reset.epoch, epoch, `claim ${i + 1}, in the cool-down: reset alone to the current epoch`);
    assert.equal(reset.seq, 5);
    await expectMsgs(phone, 1, 5, ids);
    epoch = reset.epoch as string;
    await phone.close();
  }
  // Every frame the tablet was sent meanwhile: one reset (to the epoch of the one rotation), the inbox again.
  const seen = await framesUpToPong(tablet);
  const resets = seen.filter((f) => f.t === 'reset');
  assert.deepEqual(resets, [{ t: 'reset', epoch, seq: 5 }], `the tablet is reset once, not once per loop: ${resets.length} resets`);
  assert.deepEqual(seen.filter((f) => f.t === 'msg').map((f) => f.id), ids, 'the inbox sent again once');
  // One warning of the rotation; one line of the claims kept from rotating, the rest thinned to debug.
  const claims = lines.filter((l) => l.msg?.startsWith('a device resumed from a last_seq above') === true);
  assert.deepEqual(claims.map((l) => [l.level, l.msg?.includes('within the cool-down')]),
    [[40, false], [30, true], ...Array.from({ length: loops - 2 }, () => [20, true])]);

  // A genuine loss within the cool-down: Redis gives the inbox back without seqs 4 and 5,
  // same epoch. The tablet (sent 5) and the looping phone (connected again) are both reset
  // under a new epoch: a rotation the node's deliveries prove has no cool-down.
  const phone = await server.connect(user, { device: 'phone', params: { last_seq: 5, epoch } });
  await expectWelcome(phone, 6, 5);
  const keys = inbox.keys.user(user);
  await raw.xdel(keys.inbox, '4-0', '5-0');
  await raw.hset(keys.meta, 'seq', '3');
  // The ping pulls the inbox: its pong is written at once, the reset after the read.
  tablet.send({ t: 'ping' });
  const lossReset = await tablet.nextOf('reset');
  assert.notEqual(lossReset.epoch, epoch, 'the tablet is reset under a new epoch');
  assert.equal(lossReset.seq, 3);
  assert.deepEqual(await phone.nextOf('reset'), lossReset, 'and so is the other device');
  assert.equal(lines.filter((l) => l.level === 40 && l.msg?.startsWith('inbox came back from Redis with less') === true).length, 1);
});
