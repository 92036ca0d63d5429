/**
 * An operator sees what devices were told they can no longer get (docs/api.md,
 * "GET /metrics"): `pixiu_delivery_gap_seqs_total{reason}` counts the seqs of every
 * inbox `gap` frame written that is news to the device (not marked `redelivered`),
 * `pixiu_delivery_gaps_total{reason}` those frames, `pixiu_broadcast_gaps_total` the
 * broadcast stream's `gap` frames and `pixiu_channel_gaps_total` the channels' (none
 * here: every scenario asserts it stays 0; counted ones: test/channels/trimmed-gap) —
 * end to end on a real Redis and real sockets, read from `/metrics`. (Which gaps are
 * sent, and why: gap-reasons.test.ts.)
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import type { CleanupList } from '../harness/pixiu-server.js';
import type { RedisServer } from '../harness/redis-server.js';
import { postBroadcast, type Posted } from '../broadcast/broadcast-fixture.js';
import { framesSent, gapCounts, startGateway } from './gateway-fixture.js';
import { expectMsgs, expectWelcome, postMany, postOne, startDelivery } from './delivery-fixture.js';

let redis: RedisServer;
let cleanup: CleanupList;

fileRedis(async (ctx) => {
  ({ redis, cleanup } = ctx);
});

/** {@link gapCounts} with every counter at 0 but those of `counts`. */
function expected(counts: Record<string, number>): Record<string, number> {
  const all: Record<string, number> = { broadcast: 0, channel: 0 };
  for (const reason of ['trimmed', 'expired', 'undeliverable']) all[`seqs ${reason}`] = all[`frames ${reason}`] = 0;
  return { ...all, ...counts };
}

test('devices behind the inbox cap, resuming with their last_seq, count the trimmed seqs each was told of past its last_seq; a device with nothing to resume from counts none', async () => {
  const { gw } = await startDelivery(cleanup, 'gm-trim', { redisUrl: redis.url, inboxCap: '5', ackTimeoutMs: '60000' });
  assert.deepEqual(await gapCounts(gw), expected({}), 'every series there from the start, at 0');
  const ids = await postMany(gw.client, 'tom', 10);
  // The cap keeps 6..10.
  const phone = await gw.connect('tom', { device: 'phone', params: { last_seq: 2 } });
  await expectWelcome(phone, 6, 10);
  assert.deepEqual(await phone.next(), { t: 'gap', from: 3, to: 5, reason: 'trimmed' });
  await expectMsgs(phone, 6, 10, ids);
  assert.deepEqual(await gapCounts(gw), expected({ 'seqs trimmed': 3, 'frames trimmed': 1 }));

  // Another device had more: only what it misses past its last_seq is news to it.
  const tablet = await gw.connect('tom', { device: 'tablet', params: { last_seq: 4 } });
  await expectWelcome(tablet, 6, 10);
  assert.deepEqual(await tablet.next(), { t: 'gap', from: 5, to: 5, reason: 'trimmed' });
  await expectMsgs(tablet, 6, 10, ids);
  // A new device (no last_seq, no stored cursor) starts at the first retained message: no gap.
  const laptop = await gw.connect('tom', { device: 'laptop' });
  await expectWelcome(laptop, 6, 10);
  await expectMsgs(laptop, 6, 10, ids);
  assert.deepEqual(await gapCounts(gw), expected({ 'seqs trimmed': 4, 'frames trimmed': 2 }));
  assert.equal(await framesSent(gw, 'gap'), 2);
});

test('a message whose ttl passed before its device came counts as one expired seq', async () => {
  const { gw } = await startDelivery(cleanup, 'gm-expired', { redisUrl: redis.url, ackTimeoutMs: '60000' });
  const doomed = await postOne(gw.client, 'eve', { ttl: 1 });
  await waitUntil(`message ${doomed.id} expired`, async () => (await gw.client.get(`/v1/messages/${doomed.id}`)).status === 404, 5000);
  const kept = await postOne(gw.client, 'eve');
  const client = await gw.connect('eve', { device: 'phone', params: { last_seq: 0 } });
  await expectWelcome(client, 1, 2);
  assert.deepEqual(await client.next(), { t: 'gap', from: 1, to: 1, reason: 'expired' });
  await expectMsgs(client, 2, 2, [kept.id], 2);
  assert.deepEqual(await gapCounts(gw), expected({ 'seqs expired': 1, 'frames expired': 1 }));
});

test('a gap marked redelivered (a message the device was sent, expired before the redelivery round) is no news: not counted', { timeout: 30_000 }, async () => {
  const { gw } = await startDelivery(cleanup, 'gm-redelivered', { redisUrl: redis.url, ackTimeoutMs: '1500', redeliveryBackoffMs: '60000,60000,60000' });
  const client = await gw.connect('rita', { device: 'phone' });
  await expectWelcome(client, 1, 0);
  const expiring = await postOne(gw.client, 'rita', { ttl: 1 });
  const [sent] = await expectMsgs(client, 1, 1, [expiring.id], 1, { ackEvery: 0 });
  assert.equal(sent?.seq, 1);
  // Not acked: the round an ack timeout later finds its content expired, a gap in its place.
  assert.deepEqual(await client.next(5000), { t: 'gap', from: 1, to: 1, reason: 'expired', redelivered: true });
  assert.deepEqual(await gapCounts(gw), expected({}));
  assert.equal(await framesSent(gw, 'gap'), 1, 'pixiu_ws_frames_sent_total counts it');
});

test('a connection resuming with a last_bseq the broadcast stream trimmed past counts one broadcast gap, and no inbox gap', async () => {
  const gw = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: 'gm-bcast:', storeDurability: 'relaxed', broadcastStreamCap: '2' });
  const posted: Posted[] = [];
  for (let i = 0; i < 4; i++) posted.push(await postBroadcast(gw.client, { data: { i } }));
  // The stream keeps the last two: the one after posted[0] is gone.
  const client = await gw.connect('bob', { params: { last_bseq: (posted[0] as Posted).bseq } });
  assert.equal((await client.next()).t, 'welcome');
  assert.deepEqual(await client.next(), { t: 'gap', stream: 'broadcast', from: (posted[0] as Posted).bseq, to: (posted[2] as Posted).bseq });
  assert.deepEqual([(await client.next()).bseq, (await client.next()).bseq], [(posted[2] as Posted).bseq, (posted[3] as Posted).bseq]);
  assert.deepEqual(await gapCounts(gw), expected({ broadcast: 1 }));
});
