/**
 * A single `POST /v1/messages` takes its recipients from the node's in-progress budget
 * (twice `PIXIU_BATCH_MAX_RECIPIENTS`; docs/api.md, "Messages") counted up to what one
 * batch may reach: a room larger than that (PIXIU_ROOM_SIZE_CAP may be) fits beside
 * other messages in progress instead of only beside none, which under steady traffic
 * was never (a reviewer's finding). A room message reads its room's size once. The real
 * service with a limit of 10, real Redis.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import type { Inbox } from '../../src/inbox/inbox.js';
import { openInbox, readWholeInbox, waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { addMembers } from '../rooms/room-fixture.js';

let gw: GatewayFixture;
let inbox: Inbox;
let probe: Redis;

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed', batchMaxRecipients: '10', redisCommandTimeoutMs: '20s' });
  ({ inbox, redis: probe } = await openInbox(cleanup, redis.url));
});

test('a room message to more members than one batch may reach counts that many in the budget, and goes through beside a batch in progress', async () => {
  const inProgress = async (): Promise<number> =>
    Number(/^pixiu_batch_recipients_in_progress (\d+)/m.exec((await gw.client.get('/metrics', { headers: { authorization: '' } })).text)?.[1] ?? -1);
  const members = Array.from({ length: 15 }, (_, i) => `big-m-${i}`);
  await addMembers(gw.client, 'big-room', members);
  // Redis holds every write until the pause ends (below): the messages stay in progress.
  await probe.client('PAUSE', '15000', 'WRITE');
  try {
    // 15 members count as 10 (one batch's limit)…
    const room = gw.client.post('/v1/messages', { room: 'big-room', type: 't', data: 1 });
    await waitUntil('the room message is in progress', async () => (await inProgress()) === 10);
    // …so a batch reaching 10 fits beside it in the budget of 20 (15 + 10 would not).
    const batch = gw.client.post('/v1/messages/batch', { messages: [{ to: Array.from({ length: 10 }, (_, i) => `big-b-${i}`), type: 't', data: 0 }] });
    await waitUntil('the batch is in progress too', async () => (await inProgress()) === 20);
    await probe.client('UNPAUSE');
    assert.equal((await room).status, 201);
    const answer = await batch;
    assert.equal(answer.status, 200, answer.text);
    assert.deepEqual((answer.body as { results: { status: number }[] }).results.map((r) => r.status), [201]);
  } finally {
    await probe.client('UNPAUSE');
  }
  assert.equal(await inProgress(), 0);
  assert.equal((await readWholeInbox(inbox, 'big-m-14')).length, 1);
});

test('a room message reads its room\'s size once, on both routes: the size read for the budget is the one ingest goes by', async () => {
  await addMembers(gw.client, 'once-room', ['once-1', 'once-2']);
  const sizeReads = async (): Promise<number> => Number(/cmdstat_zcard:calls=(\d+)/.exec(await probe.info('commandstats'))?.[1] ?? 0);
  let before = await sizeReads();
  assert.equal((await gw.client.post('/v1/messages', { room: 'once-room', type: 't', data: 1 })).status, 201);
  assert.equal(await sizeReads() - before, 1, 'one ZCARD for a single room POST');
  before = await sizeReads();
  const batch = await gw.client.post('/v1/messages/batch', { messages: [{ room: 'once-room', type: 't', data: 2 }, { room: 'once-room', type: 't', data: 3 }] });
  assert.deepEqual((batch.body as { results: { status: number }[] }).results.map((r) => r.status), [201, 201]);
  assert.equal(await sizeReads() - before, 1, 'one ZCARD for a batch naming the room twice');
  assert.equal((await readWholeInbox(inbox, 'once-2')).length, 3);
});
