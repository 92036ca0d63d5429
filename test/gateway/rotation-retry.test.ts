/**
 * An epoch rotation the node's deliveries proved, whose call to Redis fails (DESIGN.md
 * §11; docs/decisions.md "Redis with less than it had"). Redis gives a user's inbox back
 * with less (seqs 3 and 4 lost, same epoch) while a device that was sent 1..4 stays
 * connected; two new messages take seqs 3 and 4 again, and the append of 4 on this node
 * lands on the highest seq delivered, as another message: the loss is proven, and a new
 * epoch asked for. That call fails (here: Redis's ACL refuses the script's first
 * command to the service's user; in production Redis down or a command timeout).
 * Before, the failed call was answered like a made one: the pull after it read latest
 * 4, saw nothing, and the device kept the old epoch, never sent the new 3 and 4 and
 * never told `reset`. Now the rotation is asked for again after the retry wait of a failed
 * fetch, and the device is reset. Real Redis, the real service.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { openInbox, waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { expectMsgs, expectWelcome, postMany, snapshotInbox, startDelivery } from './delivery-fixture.js';

test('a proven epoch rotation whose call fails is asked for again after the retry wait, and the connected device is reset', async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { logger, lines } = capturingLogger();
  const { gw: server } = await startDelivery(steps, 'rr1', { redisUrl: own.url }, logger);
  const { redis: raw, inbox } = await openInbox(steps, own.url, 'rr1:');
  const user = 'rhea';
  const keys = inbox.keys.user(user);
  const kept = await postMany(server.client, user, 2);
  const restore = await snapshotInbox(raw, keys);
  const ids = [...kept, ...await postMany(server.client, user, 2, 3)];

  const tablet = await server.connect(user, { device: 'tablet' });
  const epoch = (await expectWelcome(tablet, 1, 4)).epoch as string;
  await expectMsgs(tablet, 1, 4, ids);

  // Redis gives the inbox back as it was after seq 2, same epoch.
  await restore();
  // Redis refuses the rotation script's first command (HGET of the epoch: a script that
  // fails later keeps what it wrote before) and the inbox reads' XRANGE to the service's
  // user (an append uses neither): every rotation call and every read fails until they
  // are allowed again. No read can show the loss; only the offer of this node's append
  // of seq 4 does.
  await raw.call('ACL', 'SETUSER', 'default', '-hget', '-xrange');
  steps.after(async () => { await raw.call('ACL', 'SETUSER', 'default', '+hget', '+xrange'); });
  const fresh = await postMany(server.client, user, 2, 3);
  await waitUntil('the rotation failed', async () => lines.some((l) => l.msg === 'inbox epoch rotation failed, will retry'), 8000, 10);
  await raw.call('ACL', 'SETUSER', 'default', '+hget', '+xrange');

  // The retry comes within the longest retry wait (4 × 1 s).
  const reset = await tablet.nextOf('reset', 8000);
  assert.notEqual(reset.epoch, epoch, 'reset under a new epoch');
  assert.equal(reset.seq, 4);
  await expectMsgs(tablet, 1, 4, [...kept, ...fresh]);
  assert.notEqual(await raw.hget(keys.meta, 'epoch'), epoch, 'the inbox has a new epoch: an offline device of the old one is reset too');
});
