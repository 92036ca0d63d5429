/**
 * A large batch shares Redis with the requests that come after it (docs/decisions.md,
 * "Inbox"): its appends are one flow of the append pipeline, taking turns with other
 * requests' appends, so a single message posted while 60,000 appends of a batch are
 * under way is answered before half of them are made, with every append of both made
 * in the end. The
 * real service, real Redis.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import type { Inbox } from '../../src/inbox/inbox.js';
import { openInbox, readWholeInbox, waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';

let gw: GatewayFixture;
let inbox: Inbox;
let probe: Redis;

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed', redisCommandTimeoutMs: '10s' });
  ({ inbox, redis: probe } = await openInbox(cleanup, redis.url));
});

type Item = { status: number };

/** EVALSHA calls Redis has run (the inbox appends among them). */
async function evalshaCalls(redis: Redis): Promise<number> {
  return Number(/cmdstat_evalsha:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0);
}

test('a message posted while a 60,000-recipient batch is being appended is answered before the batch, and both are complete', async () => {
  const items = 60;
  const per = 1000;
  let batchDone = false;
  const batch = gw.client.post('/v1/messages/batch', {
    messages: Array.from({ length: items }, (_, i) => ({ to: Array.from({ length: per }, (_, j) => `fair-${i}-${j}`), type: 't', data: i })),
  }).finally(() => { batchDone = true; });
  const before = await evalshaCalls(probe);
  await waitUntil('the batch\'s appends are under way', async () => (await evalshaCalls(probe)) - before >= 2000);
  assert.equal(batchDone, false, 'the batch is still being appended');
  const single = await gw.client.post('/v1/messages', { to: 'fair-other', type: 't', data: 'meanwhile' });
  assert.equal(single.status, 201, single.text);
  // Queued behind the whole batch, it would have waited for all 60,000 appends.
  const doneThen = (await evalshaCalls(probe)) - before;
  assert.ok(doneThen < (items * per) / 2, `answered after ${doneThen} of the batch's ${items * per} appends`);
  assert.equal(batchDone, false, 'the single message was answered before the batch');
  const answer = await batch;
  assert.equal(answer.status, 200, answer.text);
  assert.deepEqual((answer.body as { results: Item[] }).results.map((r) => r.status), Array.from({ length: items }, () => 201));
  assert.equal((await readWholeInbox(inbox, 'fair-other')).length, 1);
  for (const user of ['fair-0-0', `fair-${items - 1}-${per - 1}`, 'fair-30-500']) assert.equal((await readWholeInbox(inbox, user)).length, 1, user);
});
