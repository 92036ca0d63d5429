/**
 * An epoch rotation the node's deliveries proved, whose call to Redis failed, when the
 * user's last connection on that node closes before the retry (DESIGN.md §11;
 * docs/decisions.md "Redis with less than it had"). As in rotation-retry.test.ts, Redis
 * gives the inbox back without seqs 3 and 4 (same epoch) while the tablet, sent 1..4,
 * is connected; two new messages take 3 and 4 again, the append of 4 on this node lands
 * on the highest seq delivered as another message, and the rotation asked for fails
 * (Redis's ACL refuses its first command). Then the tablet goes offline.
 *
 * Before, the owed rotation was dropped with the session: the epoch stayed, and the
 * tablet, back with `last_seq` 4 of that epoch, was welcomed at `resume_from` 5 — the new
 * 3 and 4 skipped with no `reset` (the claim path cannot see it: the appends had passed
 * the old latest again). Now the session outlives its last connection until the
 * rotation is made (hub.ts `#owing`), and a connection that comes back to the node
 * meanwhile waits for it. Real Redis, the real service.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList, type CleanupContext } from '../harness/pixiu-server.js';
import { openInbox, waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { expectMsgs, expectWelcome, postMany, snapshotInbox, startDelivery } from './delivery-fixture.js';
import type { GatewayFixture } from './gateway-fixture.js';

/** What {@link lossProvenThenOffline} leaves: the node, Redis, the old epoch, the ids of seqs 1..4 now. */
interface Owed {
  server: GatewayFixture;
  raw: Redis;
  metaKey: string;
  epoch: string;
  ids: string[];
  /** Allows the commands the ACL refused again. */
  allow(): Promise<void>;
}

/**
 * The tablet was sent 1..4; Redis lost 3 and 4; new 3 and 4 were appended on the node,
 * whose proven rotation failed; the tablet closed and its presence is gone. Redis still
 * refuses the rotation and the reads until `allow`.
 */
async function lossProvenThenOffline(steps: CleanupContext, prefix: string, user: string): Promise<Owed> {
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { logger, lines } = capturingLogger();
  const { gw: server } = await startDelivery(steps, prefix, { redisUrl: own.url }, logger);
  const { redis: raw, inbox } = await openInbox(steps, own.url, `${prefix}:`);
  const keys = inbox.keys.user(user);
  const kept = await postMany(server.client, user, 2);
  const restore = await snapshotInbox(raw, keys);
  const lost = await postMany(server.client, user, 2, 3);

  const tablet = await server.connect(user, { device: 'tablet' });
  const epoch = (await expectWelcome(tablet, 1, 4)).epoch as string;
  await expectMsgs(tablet, 1, 4, [...kept, ...lost]);

  await restore();
  // The rotation script's first command and the reads' XRANGE are refused (rotation-retry.test.ts).
  await raw.call('ACL', 'SETUSER', 'default', '-hget', '-xrange');
  const allow = async (): Promise<void> => { await raw.call('ACL', 'SETUSER', 'default', '+hget', '+xrange'); };
  steps.after(allow);
  const fresh = await postMany(server.client, user, 2, 3);
  await waitUntil('the rotation failed', async () => lines.some((l) => l.msg === 'inbox epoch rotation failed, will retry'), 8000, 10);

  await tablet.close();
  await waitUntil('the tablet left the node', async () => {
    const answer = await server.client.get(`/v1/users/${user}/presence`);
    return (answer.body as { online?: boolean }).online === false;
  }, 8000, 20);
  return { server, raw, metaKey: keys.meta, epoch, ids: [...kept, ...fresh], allow };
}

test('a proven rotation that failed is still made after the user\'s last connection on the node closed: the device back with its old last_seq is reset, not skipped past the seqs assigned again', async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const user = 'ossian';
  const { server, raw, metaKey, epoch, ids, allow } = await lossProvenThenOffline(steps, 'ro1', user);

  // Redis answers again; nobody of the user is connected anywhere.
  await allow();
  // The node's retry comes within the longest retry wait (4 × 1 s).
  await waitUntil('the owed rotation was made with no connection of the user', async () => await raw.hget(metaKey, 'epoch') !== epoch, 8000, 20);

  const back = await server.connect(user, { device: 'tablet', params: { last_seq: 4, epoch } });
  const welcome = await expectWelcome(back, 1, 4);
  assert.notEqual(welcome.epoch, epoch);
  assert.deepEqual(await back.next(), { t: 'reset', epoch: welcome.epoch, seq: 4 });
  await expectMsgs(back, 1, 4, ids);
});

test('a device that comes back to the node while its proven rotation is still owed waits for it, and is reset', async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const user = 'oona';
  const { server, raw, metaKey, epoch, ids, allow } = await lossProvenThenOffline(steps, 'ro2', user);

  // Back while Redis still refuses: its session (the one that owes the rotation) holds it.
  const back = await server.connect(user, { device: 'tablet', params: { last_seq: 4, epoch } });
  await allow();
  const welcome = await expectWelcome(back, 1, 4);
  assert.notEqual(welcome.epoch, epoch, `welcomed under the old epoch: the new seqs 3 and 4 (${ids[2]}, ${ids[3]}) are skipped`);
  assert.deepEqual(await back.next(), { t: 'reset', epoch: welcome.epoch, seq: 4 });
  await expectMsgs(back, 1, 4, ids);
  assert.equal(await raw.hget(metaKey, 'epoch'), welcome.epoch);
});
