/**
 * A device that resumes from its stored ack cursor (no `last_seq`: DESIGN.md §5, docs/protocol.md
 * "Where delivery starts" case 4) after the inbox got a new epoch while it was away is
 * told so, as a device giving `last_seq` and `epoch` of the old epoch is: `reset`, then
 * the `trimmed` gap of the seqs below the first retained one, marked `redelivered` up to
 * its cursor, news after it, then the retained messages. A black-box tester's finding F1
 * (walk7): the rotation dropped the stored cursors, the device resumed as a new one from
 * the first retained seq, and the seqs between its cursor and that one, which it never
 * had, were skipped with no `gap` and no `reset`. Both epoch changes the docs name: a
 * generation raise (`pixiu redis lost-writes`: the next append rotates), and another
 * device's `last_seq` above the latest (a resume claim's rotation). And a device whose
 * first ack of the old epoch was still held by its node (acks reach Redis in rounds) as
 * another node rotated: ack-5.lua dropped it, and the device came back as a new one
 * (a fresh review's finding, cursorreview F3); ack-7.lua makes its kept cursor.
 *
 * Real redis-server (the harness's), real service in process, real WebSocket clients;
 * inbox cap 5.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { waitUntil } from '../harness/checks.js';
import type { TestClient } from '../harness/ws-client.js';
import { raiseGeneration } from '../../src/inbox/generation.js';
import { Keys } from '../../src/redis/keys.js';
import type { Inbox } from '../../src/inbox/inbox.js';
import { expectPong, type GatewayFixture } from './gateway-fixture.js';
import { expectMsgs, expectWelcome, framesUpToPong, postMany, startDelivery, waitCursor } from './delivery-fixture.js';

const CAP = { inboxCap: '5', deliveryWindow: '20' };

/** The frames after `welcome` up to and including `msg` `lastSeq`, each `msg` acked: the reset, its gaps and the messages. */
async function framesThrough(client: TestClient, lastSeq: number): Promise<string[]> {
  const out: string[] = [];
  for (;;) {
    const f = await client.next();
    if (f.t === 'gap') out.push(`gap ${String(f.from)}-${String(f.to)} ${String(f.reason)}${f.redelivered === true ? ' redelivered' : ''}`);
    else if (f.t === 'msg') out.push(`msg ${String(f.seq)}`);
    else out.push(String(f.t));
    if (f.t === 'msg') client.ack(f.seq as number);
    if (f.t === 'msg' && f.seq === lastSeq) return out;
  }
}

const msgs = (from: number, to: number): string[] => Array.from({ length: to - from + 1 }, (_, i) => `msg ${from + i}`);

/** A phone that reads and acks seqs 1..2 of a new inbox, its cursor written, and leaves. @returns the epoch */
async function phoneAckedTwo(gw: GatewayFixture, inbox: Inbox, user: string): Promise<string> {
  const ids = await postMany(gw.client, user, 2);
  const phone = await gw.connect(user, { device: 'phone' });
  const epoch = (await expectWelcome(phone, 1, 2)).epoch as string;
  await expectMsgs(phone, 1, 2, ids);
  await waitCursor(inbox, user, 'phone', 2);
  await phone.close();
  return epoch;
}

/**
 * The phone back without `last_seq` once seqs 3..12 were posted under the new epoch (the
 * cap keeps 8..12): what a device with `last_seq` 2 of `epoch` gets, and, having acked
 * the new epoch's seqs, a plain resume after them on its next connection.
 */
async function expectPhoneReset(gw: GatewayFixture, inbox: Inbox, user: string, epoch: string): Promise<void> {
  const expected = ['reset', 'gap 1-2 trimmed redelivered', 'gap 3-7 trimmed', ...msgs(8, 12)];
  const control = await gw.connect(user, { device: 'control', params: { last_seq: 2, epoch } });
  await expectWelcome(control, 8, 12);
  assert.deepEqual(await framesThrough(control, 12), expected, 'a device with last_seq 2 of the old epoch');
  await control.close();

  const phone = await gw.connect(user, { device: 'phone' });
  const welcome = await expectWelcome(phone, 8, 12);
  assert.notEqual(welcome.epoch, epoch);
  assert.deepEqual(await framesThrough(phone, 12), expected,
    'the phone resuming from its stored cursor (2, of the old epoch) must be reset and told 3..7 are gone, not welcomed at 8 as a new device');
  await phone.close(); // its last logout on the node writes the acks it holds
  await waitCursor(inbox, user, 'phone', 12);

  const again = await gw.connect(user, { device: 'phone' });
  await expectWelcome(again, 13, 12);
  assert.deepEqual(await framesUpToPong(again), [], 'its cursor of the new epoch: no second reset');
  await again.close();
}

test('after a generation raise (`pixiu redis lost-writes`), a device resuming from its stored cursor of the old epoch is reset and told what was trimmed after it', async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { gw: first, inbox, redis: raw } = await startDelivery(steps, 'sc1', { redisUrl: own.url, ...CAP });
  const user = 'una';
  const epoch = await phoneAckedTwo(first, inbox, user);

  // The operator's `pixiu redis lost-writes`; the node comes back, and the next append
  // gives the inbox a new epoch, the numbering going on.
  await first.service.close();
  await raiseGeneration(raw, new Keys('sc1:'));
  const { gw: second } = await startDelivery(steps, 'sc1', { redisUrl: own.url, dataDir: first.config.dataDir, ...CAP });
  await postMany(second.client, user, 10, 3);
  await expectPhoneReset(second, inbox, user, epoch);
});

test('after another device\'s last_seq above the latest gave the inbox a new epoch, a device resuming from its stored cursor of the old epoch is reset and told what was trimmed after it', async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { gw, inbox } = await startDelivery(steps, 'sc2', { redisUrl: own.url, ...CAP });
  const user = 'vera';
  const epoch = await phoneAckedTwo(gw, inbox, user);

  const tablet = await gw.connect(user, { device: 'tablet', params: { last_seq: 25, epoch } });
  await expectWelcome(tablet, 1, 2);
  assert.deepEqual(await framesThrough(tablet, 2), ['reset', ...msgs(1, 2)], 'the claim above the latest resets the tablet');
  await tablet.close();

  await postMany(gw.client, user, 10, 3);
  await expectPhoneReset(gw, inbox, user, epoch);
});

test('a device whose first ack of the old epoch was still held by its node as another node rotated the inbox is reset from it, not taken for a new device', { timeout: 60_000 }, async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  // Rounds a minute apart: the phone's acks stay on the node until its last logout writes them.
  const { gw, inbox } = await startDelivery(steps, 'sc3', { redisUrl: own.url, ackFlushIntervalMs: '60000', ...CAP });
  const user = 'wim';
  const ids = await postMany(gw.client, user, 2);
  const phone = await gw.connect(user, { device: 'phone' });
  const epoch = (await expectWelcome(phone, 1, 2)).epoch as string;
  await expectMsgs(phone, 1, 2, ids);
  await expectPong(phone); // its ack of 2 was taken, under `epoch`, and is held
  assert.equal(await inbox.deviceCursor(user, 'phone'), undefined, 'no cursor in Redis yet');

  // Another node's rotation (a resume claim's, which vouches for seqs up to 2), unseen here.
  const fresh = await inbox.rotateEpoch(user, epoch, 60_000, 2);
  assert.ok(fresh !== null && fresh !== epoch);
  await phone.close();
  // The held ack, of `epoch`, reaches Redis after the rotation: the cursor the rotation would have kept.
  await waitUntil('the phone\'s kept cursor', async () => (await inbox.deviceCursor(user, 'phone'))?.epoch === epoch, 5_000, 20);
  assert.deepEqual(await inbox.deviceCursor(user, 'phone'), { seq: 2, epoch });

  await postMany(gw.client, user, 10, 3);
  await expectPhoneReset(gw, inbox, user, epoch);
});
