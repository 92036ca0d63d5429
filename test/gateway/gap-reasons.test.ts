/**
 * Every inbox `gap` says why its seqs are missing (docs/protocol.md "Why a gap"), end to
 * end on a real Redis and real sockets: seqs the inbox cap dropped while a device was
 * behind (connected with a full window, or offline) are `trimmed`; content whose `ttl`
 * passed is `expired`; and a trimmed run right before an expired one is two gaps, in
 * seq order — in the frames and in the history page alike. (The resume below the first
 * retained seq and an expired message alone: delivery.test.ts; content that cannot be
 * sent: unserialisable-record.test.ts.)
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { waitUntil } from '../harness/checks.js';
import { RedisServer } from '../harness/redis-server.js';
import type { GatewayFixture } from './gateway-fixture.js';
import { expectMsgs, expectWelcome, postMany, postOne, startDelivery, waitCursor } from './delivery-fixture.js';

let redis: RedisServer;

before(async () => {
  redis = await RedisServer.start();
});

after(async () => {
  await redis?.destroy();
});

/**
 * A service whose inboxes keep 5 entries, `window` unacked messages per connection (and
 * as many entries per inbox read: gaps merge within a read), and no redelivery within a test.
 */
function capped(t: Parameters<typeof startDelivery>[0], prefix: string, window = 1): ReturnType<typeof startDelivery> {
  return startDelivery(t, prefix, { redisUrl: redis.url, inboxCap: '5', deliveryWindow: String(window), ackTimeoutMs: '60000' });
}

/** Posts a message with a 1 s ttl to `user`. */
function postExpiring(gw: GatewayFixture, user: string): Promise<{ id: string; seq: number }> {
  return postOne(gw.client, user, { ttl: 1 });
}

/** Waits until the content of `id` has expired (GET /v1/messages/{id} is 404). */
async function expired(gw: GatewayFixture, id: string): Promise<void> {
  await waitUntil(`message ${id} expired`, async () => (await gw.client.get(`/v1/messages/${id}`)).status === 404, 5000);
}

test('trimmed by the inbox cap while connected behind a full window: a gap of reason trimmed, then the retained messages', async (t) => {
  const { gw } = await capped(t, 'trim-live');
  const client = await gw.connect('tara', { device: 'phone' });
  await expectWelcome(client, 1, 0);
  const [first] = await postMany(gw.client, 'tara', 1);
  await expectMsgs(client, 1, 1, [first as string], 1, { ackEvery: 0 });
  // Nine more while seq 1 is unacked (the window is full): the cap keeps 6..10.
  const ids = await postMany(gw.client, 'tara', 9, 2);
  client.ack(1);
  assert.deepEqual(await client.next(), { t: 'gap', from: 2, to: 5, reason: 'trimmed' });
  await expectMsgs(client, 6, 10, ids, 2);
});

test('trimmed while offline: a device back without last_seq (its stored cursor) gets a gap of reason trimmed', async (t) => {
  const { gw, inbox } = await capped(t, 'trim-away');
  const client = await gw.connect('otto', { device: 'phone' });
  await expectWelcome(client, 1, 0);
  const ids = await postMany(gw.client, 'otto', 2);
  await expectMsgs(client, 1, 2, ids);
  await waitCursor(inbox, 'otto', 'phone', 2);
  await client.close();
  const more = await postMany(gw.client, 'otto', 8, 3);
  const back = await gw.connect('otto', { device: 'phone' });
  await expectWelcome(back, 6, 10);
  assert.deepEqual(await back.next(), { t: 'gap', from: 3, to: 5, reason: 'trimmed' });
  await expectMsgs(back, 6, 10, more, 3);
});

test('a trimmed run right before an expired one is two gaps, trimmed then expired, on the socket and in history', async (t) => {
  const { gw } = await capped(t, 'mixed', 2);
  const client = await gw.connect('mia', { device: 'phone' });
  await expectWelcome(client, 1, 0);
  const ids = await postMany(gw.client, 'mia', 2);
  await expectMsgs(client, 1, 2, ids, 1, { ackEvery: 0 });
  // Seqs 1 and 2 unacked (the window is full): 3..5 kept, 6..7 expiring, 8..10 kept;
  // the cap keeps 6..10.
  await postMany(gw.client, 'mia', 3, 3);
  const doomed = [await postExpiring(gw, 'mia'), await postExpiring(gw, 'mia')];
  assert.deepEqual(doomed.map((m) => m.seq), [6, 7]);
  const kept = await postMany(gw.client, 'mia', 3, 8);
  for (const m of doomed) await expired(gw, m.id);
  // One read brings 6 and 7: the seqs before them are gone from the inbox, theirs from the store.
  client.ack(2);
  assert.deepEqual(await client.next(), { t: 'gap', from: 3, to: 5, reason: 'trimmed' });
  assert.deepEqual(await client.next(), { t: 'gap', from: 6, to: 7, reason: 'expired' });
  await expectMsgs(client, 8, 10, kept, 8);

  const history = await gw.client.get('/v1/users/mia/messages');
  assert.equal(history.status, 200, history.text);
  const page = history.body as { messages: { seq: number }[]; gaps: unknown };
  assert.deepEqual(page.gaps, [{ from: 1, to: 5, reason: 'trimmed' }, { from: 6, to: 7, reason: 'expired' }]);
  assert.deepEqual(page.messages.map((m) => m.seq), [8, 9, 10]);
});

test('a reset of an inbox the cap trimmed is followed by a trimmed gap from seq 1, so every seq of the new epoch is a msg or in a gap', async (t) => {
  const { gw } = await capped(t, 'reset-trim', 10);
  const ids = await postMany(gw.client, 'rosa', 8);
  // The cap keeps 4..8. A device resuming under an epoch that is not the inbox's (or
  // above its latest seq) is reset: seqs restart, and 1..3 are gone.
  for (const params of [{ last_seq: 2, epoch: 'not-the-epoch' }, { last_seq: 30 }]) {
    const client = await gw.connect('rosa', { device: 'phone', params });
    const welcome = await expectWelcome(client, 4, 8);
    assert.deepEqual(await client.next(), { t: 'reset', epoch: welcome.epoch, seq: 8 }, JSON.stringify(params));
    assert.deepEqual(await client.next(), { t: 'gap', from: 1, to: 3, reason: 'trimmed' }, JSON.stringify(params));
    await expectMsgs(client, 4, 8, ids);
    await client.close();
  }
});
