/**
 * Review finding (src/delivery/connection-state.ts deliverPage / redelivery-rounds.ts redeliveryRound):
 * a redelivery round whose resend turns out to be only gaps (the unacked message's
 * content expired before the round) leaves `rounds` at 1 with nothing in flight and
 * no timer. A message sent afterwards arms no redelivery timer (deliverPage arms one
 * only when `rounds === 0`), so it is never redelivered and the connection is never
 * closed 4008, however long the client leaves it unacked (DESIGN.md §5 "Redelivery").
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { expectFrame, expectWelcome, postOne, startDelivery } from './delivery-fixture.js';

const cleanup = cleanupList();
let redis: RedisServer;

before(async () => {
  redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
});

after(() => cleanup.run());

test('after a round that resent only an expired message (a gap), the next unacked message is still redelivered, then closed 4008', { timeout: 60_000 }, async () => {
  const ACK_TIMEOUT_MS = 1500;
  const BACKOFF = [300, 300, 300];
  const { gw: server } = await startDelivery(cleanup, 'rb-redo', { redisUrl: redis.url, ackTimeoutMs: String(ACK_TIMEOUT_MS), redeliveryBackoffMs: BACKOFF.join(',') });
  const client = await server.connect('rita', { device: 'phone' });
  await expectWelcome(client, 1, 0);
  const expiring = await postOne(server.client, 'rita', { ttl: 1 });
  const m1 = await expectFrame(client, 'msg');
  assert.deepEqual([m1.seq, m1.id], [1, expiring.id]);
  // Not acked. The round an ack timeout later finds seq 1 expired: a gap in its place.
  assert.deepEqual(await client.next(5000), { t: 'gap', from: 1, to: 1, reason: 'expired', redelivered: true });
  // Let that round's back-off pass (nothing in flight then): a time of the case, so a fixed wait, twice the back-off.
  await new Promise((r) => setTimeout(r, 2 * BACKOFF[0]!));
  const kept = await postOne(server.client, 'rita');
  const m2 = await expectFrame(client, 'msg');
  assert.deepEqual([m2.seq, m2.id, m2.redelivered], [2, kept.id, undefined]);
  // Never acked: within the ack timeout and every back-off (plus slack) it must come
  // back marked redelivered, and the connection must end 4008.
  const boundMs = ACK_TIMEOUT_MS + BACKOFF.reduce((a, b) => a + b, 0) + 3000;
  const started = Date.now();
  // (A round resends from acked + 1: seq 1's gap, marked, may come again first.)
  const next = await client.nextOf('msg', boundMs).catch((err: Error) => err);
  assert.ok(!(next instanceof Error), `seq 2 left unacked for ${Date.now() - started} ms: never redelivered, connection not closed (${next instanceof Error ? next.message.slice(0, 120) : ''})`);
  assert.deepEqual([next.t, next.seq, next.redelivered], ['msg', 2, true]);
  const { code } = await client.waitClose(boundMs);
  assert.equal(code, 4008, 'ack timeout after the last round');
});
