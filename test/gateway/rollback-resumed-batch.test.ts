/**
 * Redis gives a user's inbox back with less under the same epoch (a failover to a
 * replica behind, a restore from an older snapshot: DESIGN.md §11) while a device is
 * connected to the node that makes the appends, and one batch lands before the node
 * reads the inbox again. The device's position came from its `last_seq` and `epoch`, or
 * from its stored ack cursor, and nothing was delivered on its connection yet: before,
 * the node knew no MsgID of the inbox's seqs (the epoch guard learnt them only from its
 * deliveries), so a batch reaching the old latest was delivered from past the device's
 * position, and the seqs assigned again up to it were skipped with no `reset` (a
 * black-box tester's finding D5). Now the guard also learns the inbox's newest entry
 * from every read (range-3.lua), so the append that lands on that seq as another
 * message proves the loss, as it does for a device that was delivered it live.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList, type CleanupContext } from '../harness/pixiu-server.js';
import { openInbox } from '../harness/checks.js';
import type { Inbox } from '../../src/inbox/inbox.js';
import type { GatewayFixture } from './gateway-fixture.js';
import { expectFrame, expectMsgs, expectWelcome, postMany, snapshotInbox, startDelivery } from './delivery-fixture.js';

/**
 * A service on a Redis of its own; `user` gets 3 messages, a snapshot of its keys is
 * taken (`restore` gives them back so: latest 3, same epoch), then 3 more.
 */
async function sixThenRestorable(t: CleanupContext, prefix: string, user: string, settings: { inboxCap?: string } = {}): Promise<{
  server: GatewayFixture; inbox: Inbox; epoch: string; kept: string[]; restore: () => Promise<void>;
}> {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { gw: server } = await startDelivery(steps, prefix, { redisUrl: own.url, ...settings });
  const { redis: raw, inbox } = await openInbox(steps, own.url, `${prefix}:`);
  const kept = await postMany(server.client, user, 3);
  const restore = await snapshotInbox(raw, inbox.keys.user(user));
  await postMany(server.client, user, 3, 4);
  const epoch = (await inbox.range(user, 0, 1)).epoch;
  assert.ok(epoch !== null);
  return { server, inbox, epoch, kept, restore };
}

/** One case: how the device starts at 6, and the batch that lands after Redis went back to 3. */
interface Case {
  readonly name: string;
  /** `last_seq`: it connects with `last_seq` 6 and the epoch; `cursor`: its stored ack cursor is 6 and it sends none. */
  readonly start: 'last_seq' | 'cursor';
  /** Messages in the one batch: seqs 4 .. 3 + batch. */
  readonly batch: number;
}

const CASES: readonly Case[] = [
  {
    name: 'a device connected with last_seq 6 and its epoch, sent nothing yet: Redis gives the inbox back at 3, one batch of 5 lands at 4..8 before any read — reset under a new epoch and every message of the batch, 4..6 included',
    start: 'last_seq', batch: 5,
  },
  {
    name: 'the batch ends exactly at the device\'s position (4..6, the device at last_seq 6): it is not taken for "nothing new", the device is reset and gets 4..6',
    start: 'last_seq', batch: 3,
  },
  {
    name: 'a device resumed from its stored ack cursor (no last_seq), sent nothing yet, is protected the same: one batch of 4 at 4..7 after the inbox went back to 3 resets it',
    start: 'cursor', batch: 4,
  },
  {
    name: 'a batch that stops short of the device\'s position (4..5, the device at last_seq 6): the read it makes finds the latest below the position, and the device is reset',
    start: 'last_seq', batch: 2,
  },
];

for (const [i, c] of CASES.entries()) {
  test(c.name, async (t) => {
    const user = `user-${i}`;
    const { server, inbox, epoch, kept, restore } = await sixThenRestorable(t, `rrb${i}`, user);
    if (c.start === 'cursor') assert.equal(await inbox.ack(user, 'phone', 6, epoch), 6);
    const params = c.start === 'last_seq' ? { last_seq: 6, epoch } : {};
    const phone = await server.connect(user, { device: 'phone', params });
    await expectWelcome(phone, 7, 6);
    await restore();
    const batch = await postMany(server.client, user, c.batch, 4);
    const latest = 3 + c.batch;
    const reset = await expectFrame(phone, 'reset', 5000);
    assert.notEqual(reset.epoch, epoch, 'a new epoch');
    assert.equal(reset.seq, latest);
    await expectMsgs(phone, 1, latest, [...kept, ...batch]);
  });
}

test('a batch past the inbox cap after the loss (8 at 4..11, cap 5 keeps 7..11): the reset\'s trimmed gap 1..6 is news, not marked redelivered — 4..6 are the batch\'s, which the device never had (the rotation the node proved vouches for no seq of the old epoch: rotate-7.lua)', async (t) => {
  const user = 'user-cap';
  const { server, epoch, kept, restore } = await sixThenRestorable(t, 'rrbcap', user, { inboxCap: '5' });
  const phone = await server.connect(user, { device: 'phone', params: { last_seq: 6, epoch } });
  await expectWelcome(phone, 7, 6);
  await restore();
  const batch = await postMany(server.client, user, 8, 4);
  const reset = await expectFrame(phone, 'reset', 5000);
  assert.notEqual(reset.epoch, epoch, 'a new epoch');
  assert.equal(reset.seq, 11);
  const gap = await expectFrame(phone, 'gap', 5000);
  assert.deepEqual({ from: gap.from, to: gap.to, reason: gap.reason, redelivered: gap.redelivered }, { from: 1, to: 6, reason: 'trimmed', redelivered: undefined },
    'the seqs below the first retained are news: 4..6 were assigned again to the batch');
  await expectMsgs(phone, 7, 11, [...kept, ...batch]);
});
