/**
 * After a `reset`, the `trimmed` gap of the seqs below the new epoch's first retained
 * one is marked `redelivered` as far as the device is known to have had those seqs
 * under its old epoch (the new epoch goes on from the old one's numbering: a rotation,
 * src/inbox/lineage.ts), and goes out unmarked — news — for the rest (docs/protocol.md
 * "Why a gap"). A black-box tester's finding J: the whole gap came unmarked and the docs
 * said to show nothing for it, so a device at last_seq 2, behind the cap, lost the seqs
 * it never had without a word once a rotation came first; and after an inbox really
 * lost and refilled past the cap, the gap covered messages no device could have had.
 *
 * Real redis-server (the harness's), real service in process, real WebSocket clients;
 * inbox cap 5.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList } from '../harness/pixiu-server.js';
import type { TestClient } from '../harness/ws-client.js';
import { raiseGeneration } from '../../src/inbox/generation.js';
import { Keys } from '../../src/redis/keys.js';
import { expectMsgs, expectWelcome, postMany, startDelivery } from './delivery-fixture.js';

const CAP = { inboxCap: '5', deliveryWindow: '20' };

/** The frames after `welcome` up to and including `msg` `lastSeq`: the reset, its gaps and the messages. */
async function framesThrough(client: TestClient, lastSeq: number): Promise<string[]> {
  const out: string[] = [];
  for (;;) {
    const f = await client.next();
    if (f.t === 'reset') out.push('reset');
    else if (f.t === 'gap') out.push(`gap ${String(f.from)}-${String(f.to)} ${String(f.reason)}${f.redelivered === true ? ' redelivered' : ''}`);
    else if (f.t === 'msg') out.push(`msg ${String(f.seq)}`);
    else out.push(String(f.t));
    if (f.t === 'msg' && f.seq === lastSeq) return out;
  }
}

const msgs = (from: number, to: number): string[] => Array.from({ length: to - from + 1 }, (_, i) => `msg ${from + i}`);

test('a rotation that keeps the numbering (another device\'s claim): a device behind the cap is told the seqs it never had as a trimmed gap, those up to its last_seq marked redelivered', async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { gw } = await startDelivery(steps, 'rg1', { redisUrl: own.url, ...CAP });
  const user = 'pia';
  const early = await postMany(gw.client, user, 2);
  const phone = await gw.connect(user, { device: 'phone' });
  const epoch = (await expectWelcome(phone, 1, 2)).epoch as string;
  await expectMsgs(phone, 1, 2, early);
  await phone.close();
  await postMany(gw.client, user, 10, 3); // the cap keeps 8..12

  // Control: with no rotation, a device at last_seq 2 is told 3..7 are gone.
  const control = await gw.connect(user, { device: 'control', params: { last_seq: 2, epoch } });
  await expectWelcome(control, 8, 12);
  assert.deepEqual(await framesThrough(control, 12), ['gap 3-7 trimmed', ...msgs(8, 12)]);
  await control.close();

  // The tablet claims last_seq 99 under the epoch: a new epoch, seqs going on.
  const tablet = await gw.connect(user, { device: 'tablet', params: { last_seq: 99, epoch } });
  await expectWelcome(tablet, 8, 12);
  assert.deepEqual(await framesThrough(tablet, 12), ['reset', 'gap 1-7 trimmed redelivered', ...msgs(8, 12)]);
  await tablet.close();

  const back = await gw.connect(user, { device: 'phone', params: { last_seq: 2, epoch } });
  await expectWelcome(back, 8, 12);
  assert.deepEqual(await framesThrough(back, 12), ['reset', 'gap 1-2 trimmed redelivered', 'gap 3-7 trimmed', ...msgs(8, 12)],
    'the seqs 3..7 the phone never had are news, as without the rotation');
});

test('the common failover (a generation raise: the next append rotates): a device whose last_seq is past the new first retained seq gets the whole trimmed gap marked redelivered', async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { gw: first, redis: raw } = await startDelivery(steps, 'rg2', { redisUrl: own.url, ...CAP });
  const user = 'quin';
  const ids = await postMany(first.client, user, 12);
  const phone = await first.connect(user, { device: 'phone', params: { last_seq: 7 } });
  const epoch = (await expectWelcome(phone, 8, 12)).epoch as string;
  await expectMsgs(phone, 8, 12, ids);
  await phone.close();

  // The operator's `pixiu redis lost-writes` after a failover that lost nothing of this
  // user's; the node comes back and the next append gives the inbox a new epoch.
  await first.service.close();
  await raiseGeneration(raw, new Keys('rg2:'));
  const { gw: second } = await startDelivery(steps, 'rg2', { redisUrl: own.url, dataDir: first.config.dataDir, ...CAP });
  await postMany(second.client, user, 1, 13); // the cap keeps 9..13

  const back = await second.connect(user, { device: 'phone', params: { last_seq: 12, epoch } });
  await expectWelcome(back, 9, 13);
  const frames = await framesThrough(back, 13);
  assert.deepEqual(frames, ['reset', 'gap 1-8 trimmed redelivered', ...msgs(9, 13)], 'nothing the phone missed: no news');
});

test('an inbox really lost, then more messages than the cap: the trimmed gap after the reset is news (no redelivered mark)', async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { gw, redis: raw } = await startDelivery(steps, 'rg3', { redisUrl: own.url, ...CAP });
  const user = 'rolf';
  const keys = new Keys('rg3:').user(user);
  const ids = await postMany(gw.client, user, 3);
  const phone = await gw.connect(user, { device: 'phone', params: { last_seq: 0 } });
  const epoch = (await expectWelcome(phone, 1, 3)).epoch as string;
  await expectMsgs(phone, 1, 3, ids);
  await phone.close();

  await raw.del(keys.inbox, keys.meta, keys.ids, keys.acks); // Redis lost the user's inbox
  await postMany(gw.client, user, 6); // seqs restart; the cap keeps 2..6

  const back = await gw.connect(user, { device: 'phone', params: { last_seq: 3, epoch } });
  await expectWelcome(back, 2, 6);
  assert.deepEqual(await framesThrough(back, 6), ['reset', 'gap 1-1 trimmed', ...msgs(2, 6)], 'new seq 1 was never the phone\'s');
});
