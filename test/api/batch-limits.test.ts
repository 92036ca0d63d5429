/**
 * A batch is held to `PIXIU_BATCH_MAX_RECIPIENTS` recipients in all (docs/api.md,
 * "Messages"): counted in batch order, a user item its distinct recipients and a room
 * item its members; the item that goes past the limit and every item after it are 400
 * and stored nowhere, the ones before it go through. The real service with a limit of
 * 10, real Redis.
 */
import { test, type TestContext } from 'node:test';
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
  // The command timeout is above PAUSE_MS: a write held by the pause never times out.
  gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed', batchMaxRecipients: '10', redisCommandTimeoutMs: '30s' });
  ({ inbox, redis: probe } = await openInbox(cleanup, redis.url));
});

/**
 * How long the budget tests have Redis hold every write (`CLIENT PAUSE … WRITE`), ms:
 * far longer than they need, for they end the pause themselves (`CLIENT UNPAUSE`) once
 * the assertions that need messages held in progress are done. A pause that had to
 * last just long enough could end first on a loaded machine.
 */
const PAUSE_MS = 20_000;

/** Has Redis hold every write for {@link PAUSE_MS}; the pause ends when the test does, should it fail first. */
async function holdWrites(t: TestContext): Promise<void> {
  await probe.client('PAUSE', String(PAUSE_MS), 'WRITE');
  t.after(() => probe.client('UNPAUSE'));
}

type Item = { status: number; error?: { code: string; message: string } };

test('the item past the batch\'s recipient limit and every later one are 400 and stored nowhere; the earlier ones go through', async () => {
  await addMembers(gw.client, 'lim-room', ['lr-1', 'lr-2', 'lr-3', 'lr-4']);
  const answer = await gw.client.post('/v1/messages/batch', {
    messages: [
      { to: ['la', 'lb', 'lc'], type: 't', data: 0 }, // 3
      { to: 'la', type: 't', data: 'not valid', ttl: -1 }, // refused alone, counts nothing
      { room: 'lim-room', type: 't', data: 1 }, // 4 members: 7
      { to: ['ld', 'ld', 'le'], type: 't', data: 2 }, // 2 distinct: 9
      { to: ['lf', 'lg'], type: 't', data: 3 }, // 11: over
      { to: 'la', type: 't', data: 4 }, // after it: refused too
      { room: 'lim-room', type: 't', data: 5 },
    ],
  });
  assert.equal(answer.status, 200, answer.text);
  const results = (answer.body as { results: Item[] }).results;
  assert.deepEqual(results.map((r) => r.status), [201, 400, 201, 201, 400, 400, 400]);
  for (const i of [4, 5, 6]) {
    assert.equal(results[i]?.error?.code, 'INVALID_REQUEST');
    assert.match(results[i]?.error?.message ?? '', new RegExp(`^messages/${i}: the batch reaches more than 10 recipients in all from item 4 on .*send items 4 and after in another batch$`));
  }
  assert.match(results[1]?.error?.message ?? '', /ttl/);
  const count = async (user: string): Promise<number> => (await readWholeInbox(inbox, user)).length;
  assert.deepEqual(await Promise.all(['la', 'lb', 'ld', 'le', 'lf', 'lg', 'lr-1'].map(count)), [1, 1, 1, 1, 0, 0, 1]);
});

test('exactly at the limit every item goes through', async () => {
  const answer = await gw.client.post('/v1/messages/batch', {
    messages: Array.from({ length: 5 }, (_, i) => ({ to: [`at-${i}-a`, `at-${i}-b`], type: 't', data: i })),
  });
  assert.deepEqual((answer.body as { results: Item[] }).results.map((r) => r.status), [201, 201, 201, 201, 201]);
});

test('an item counted late (its client_msg_id freed by a refused item of the other kind) goes through exactly at the limit, and is 400 one past it', async () => {
  // Item 1 is a room with no members (404), which frees its key for item 2, a user item:
  // counted only once it is admitted, after item 0's 8 recipients.
  const batch = (tag: string, late: number) => ({
    messages: [
      { to: Array.from({ length: 8 }, (_, i) => `${tag}-${i}`), type: 't', data: 0 },
      { room: `${tag}-no-room`, type: 't', data: 1, client_msg_id: `${tag}-key` },
      { to: Array.from({ length: late }, (_, i) => `${tag}-late-${i}`), type: 't', data: 2, client_msg_id: `${tag}-key` },
    ],
  });
  const at = (await gw.client.post('/v1/messages/batch', batch('late-at', 2))).body as { results: Item[] };
  assert.deepEqual(at.results.map((r) => r.status), [201, 404, 201], JSON.stringify(at));
  const past = (await gw.client.post('/v1/messages/batch', batch('late-past', 3))).body as { results: Item[] };
  assert.deepEqual(past.results.map((r) => r.status), [201, 404, 400], JSON.stringify(past));
  assert.match(past.results[2]?.error?.message ?? '', /^messages\/2: the batch reaches more than 10 recipients in all from item 2 on .*send it in another batch$/);
});

test('items counted late add up: a second late item is held to the limit with the first one counted, and one refused so frees its key for a later item', async () => {
  // Items 1 and 3 are rooms with no members (404), freeing their keys for items 2 and 4,
  // user items counted only once admitted: item 2 brings the batch to 8 of 10, so item 4
  // (3 more) is over. Item 4, refused, stored nothing: its key is free again for item 5,
  // which is then that key's first message (a 404 of its own, not a 409 naming item 4).
  const tag = 'late-twice';
  const users = (name: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${tag}-${name}-${i}`);
  const answer = await gw.client.post('/v1/messages/batch', {
    messages: [
      { to: users('first', 6), type: 't', data: 0 },
      { room: `${tag}-no-room-1`, type: 't', data: 1, client_msg_id: `${tag}-key-1` },
      { to: users('late-1', 2), type: 't', data: 2, client_msg_id: `${tag}-key-1` },
      { room: `${tag}-no-room-2`, type: 't', data: 3, client_msg_id: `${tag}-key-2` },
      { to: users('late-2', 3), type: 't', data: 4, client_msg_id: `${tag}-key-2` },
      { room: `${tag}-no-room-3`, type: 't', data: 5, client_msg_id: `${tag}-key-2` },
    ],
  });
  assert.equal(answer.status, 200, answer.text);
  const results = (answer.body as { results: Item[] }).results;
  assert.deepEqual(results.map((r) => r.status), [201, 404, 201, 404, 400, 404], JSON.stringify(results));
  assert.match(results[4]?.error?.message ?? '', /^messages\/4: the batch reaches more than 10 recipients in all from item 4 on .*send it in another batch$/);
  assert.equal(results[5]?.error?.code, 'NOT_FOUND');
  const count = async (user: string): Promise<number> => (await readWholeInbox(inbox, user)).length;
  assert.deepEqual(await Promise.all([`${tag}-late-1-0`, `${tag}-late-2-0`].map(count)), [1, 0]);
});

test('batches in progress hold a node-wide budget of twice the limit: one more is 503 with Retry-After and stores nothing; once they finish it goes through', async (t: TestContext) => {
  const batch = (tag: string) => ({ messages: Array.from({ length: 5 }, (_, i) => ({ to: [`${tag}-${i}-a`, `${tag}-${i}-b`], type: 't', data: i })) });
  const inProgress = async (): Promise<number> =>
    Number(/^pixiu_batch_recipients_in_progress (\d+)/m.exec((await gw.client.get('/metrics', { headers: { authorization: '' } })).text)?.[1] ?? -1);
  // Redis holds the writes: the two batches stay in progress.
  await holdWrites(t);
  const first = gw.client.post('/v1/messages/batch', batch('bud1'));
  const second = gw.client.post('/v1/messages/batch', batch('bud2'));
  await waitUntil('both batches are in progress', async () => (await inProgress()) === 20);
  const redisErrors = async (): Promise<number> =>
    Number(/^pixiu_redis_errors_total\{kind="request"\} (\d+)/m.exec((await gw.client.get('/metrics', { headers: { authorization: '' } })).text)?.[1] ?? 0);
  const errorsBefore = await redisErrors();
  const refused = await gw.client.post('/v1/messages/batch', batch('bud3'));
  assert.equal(await redisErrors(), errorsBefore, 'a busy node is not a Redis error');
  assert.equal(refused.status, 503, refused.text);
  assert.equal(refused.headers.get('retry-after'), '1');
  assert.match(refused.text, /busy with other messages \(20 recipients in progress\); retry the batch shortly/);
  await probe.client('UNPAUSE');
  for (const answer of [await first, await second]) {
    assert.deepEqual((answer.body as { results: Item[] }).results.map((r) => r.status), [201, 201, 201, 201, 201], answer.text);
  }
  assert.equal(await inProgress(), 0);
  assert.equal((await readWholeInbox(inbox, 'bud3-0-a')).length, 0, 'the refused batch stored nothing');
  const later = await gw.client.post('/v1/messages/batch', batch('bud3'));
  assert.deepEqual((later.body as { results: Item[] }).results.map((r) => r.status), [201, 201, 201, 201, 201]);
});

test('single POSTs take from the same budget: a room message counts its members, and one that does not fit beside the messages in progress is 503 and stores nothing', async (t: TestContext) => {
  const inProgress = async (): Promise<number> =>
    Number(/^pixiu_batch_recipients_in_progress (\d+)/m.exec((await gw.client.get('/metrics', { headers: { authorization: '' } })).text)?.[1] ?? -1);
  const members = Array.from({ length: 9 }, (_, i) => `sb-m-${i}`);
  await addMembers(gw.client, 'sb-room', members);
  // Redis holds the writes: the room message (9 members) and a message to 2 users stay in progress.
  await holdWrites(t);
  const room = gw.client.post('/v1/messages', { room: 'sb-room', type: 't', data: 0 });
  await waitUntil('the room message is in progress', async () => (await inProgress()) === 9);
  const first = gw.client.post('/v1/messages', { to: ['sb-s-0', 'sb-s-1'], type: 't', data: 4 });
  await waitUntil('the message to 2 users is in progress beside it', async () => (await inProgress()) === 11);
  // 11 + 10 > 20: refused, as a batch would be (one alone always fits).
  const refused = await gw.client.post('/v1/messages', { to: Array.from({ length: 10 }, (_, i) => `sb-u-${i}`), type: 't', data: 1 });
  assert.equal(refused.status, 503, refused.text);
  assert.equal(refused.headers.get('retry-after'), '1');
  assert.match(refused.text, /busy with other messages \(11 recipients in progress\); retry the message shortly/);
  const batch = await gw.client.post('/v1/messages/batch', { messages: [{ to: Array.from({ length: 10 }, (_, i) => `sb-b-${i}`), type: 't', data: 2 }] });
  assert.equal(batch.status, 503, batch.text);
  // 11 + 9 = 20 fits: taken beside the others, still held.
  const fits = gw.client.post('/v1/messages', { to: Array.from({ length: 9 }, (_, i) => `sb-f-${i}`), type: 't', data: 3 });
  await waitUntil('the message that fits is in progress beside the others', async () => (await inProgress()) === 20);
  await probe.client('UNPAUSE');
  assert.equal((await room).status, 201);
  assert.equal((await first).status, 201);
  assert.equal((await fits).status, 201);
  assert.equal(await inProgress(), 0);
  assert.equal((await readWholeInbox(inbox, 'sb-u-0')).length, 0, 'the refused message stored nothing');
  assert.equal((await readWholeInbox(inbox, 'sb-m-8')).length, 1);
  const later = await gw.client.post('/v1/messages', { to: Array.from({ length: 10 }, (_, i) => `sb-u-${i}`), type: 't', data: 1 });
  assert.equal(later.status, 201, later.text);
});
