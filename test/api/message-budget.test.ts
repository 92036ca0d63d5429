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
import { Ingest } from '../../src/ingest/ingest.js';
import type { PixiuError } from '../../src/errors.js';
import { tempDataDir } from '../harness/pixiu-server.js';
import { openStore } from '../store/fixtures/store-harness.js';

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

test('a message over the size limit is 413 PAYLOAD_TOO_LARGE while the node\'s budget is full, not 503; a batch of such items gets their errors, one with a good item is still 503 whole', async () => {
  const inProgress = async (): Promise<number> =>
    Number(/^pixiu_batch_recipients_in_progress (\d+)/m.exec((await gw.client.get('/metrics', { headers: { authorization: '' } })).text)?.[1] ?? -1);
  const big = 'x'.repeat(70 * 1024);
  const errorOf = (body: unknown): { code: string; message: string } => (body as { error: { code: string; message: string } }).error;
  // (A room message reads its room's size on the Redis connection the held appends
  // wait on, so it is not sent here; ingest's check of one is the next test's.)
  await probe.client('PAUSE', '15000', 'WRITE');
  try {
    // Two messages reaching 10 each fill the budget of 20 until Redis takes writes again.
    const held = [0, 1].map((k) => gw.client.post('/v1/messages', { to: Array.from({ length: 10 }, (_, i) => `full-${k}-${i}`), type: 't', data: k }));
    await waitUntil('the budget is full', async () => (await inProgress()) === 20);
    const single = await gw.client.post('/v1/messages', { to: 'full-u', type: 't', data: big });
    assert.equal(single.status, 413, single.text);
    assert.equal(errorOf(single.body).code, 'PAYLOAD_TOO_LARGE');
    assert.match(errorOf(single.body).message, /^message is \d+ bytes .* over the limit of 65536 bytes/);
    const bad = await gw.client.post('/v1/messages/batch', { messages: [{ to: 'full-u', type: 't', data: big }, { to: ['full-v', 'full-w'], type: 't', data: big }] });
    assert.equal(bad.status, 200, bad.text);
    const results = (bad.body as { results: { status: number; error: { code: string; message: string } }[] }).results;
    assert.deepEqual(results.map((r) => [r.status, r.error.code]), [[413, 'PAYLOAD_TOO_LARGE'], [413, 'PAYLOAD_TOO_LARGE']]);
    assert.match(results[1]?.error.message ?? '', /^messages\/1: message is \d+ bytes/);
    // With a good item beside them the batch still does not fit: refused whole (docs/api.md).
    // This pins the rule, not the 413 fix: without that fix this batch was 503 too (the
    // next test's partial batch is what a revert fails); it fails if a good item were
    // sent past the budget, or if the bad item's 413 stood for the whole batch.
    const mixed = await gw.client.post('/v1/messages/batch', { messages: [{ to: 'full-u', type: 't', data: big }, { to: 'full-v', type: 't', data: 1 }] });
    assert.equal(mixed.status, 503, mixed.text);
    assert.match(errorOf(mixed.body).message, /^this node is busy with other messages/);
    assert.equal(await inProgress(), 20);
    await probe.client('UNPAUSE');
    for (const answer of await Promise.all(held)) assert.equal(answer.status, 201);
  } finally {
    await probe.client('UNPAUSE');
  }
  assert.equal(await inProgress(), 0);
  for (const user of ['full-u', 'full-v', 'full-w']) assert.equal((await readWholeInbox(inbox, user)).length, 0);
});

test('a batch the budget refuses is taken once its items over the size limit are left out, when the rest fits: 200 with each item\'s result in order', async () => {
  const inProgress = async (): Promise<number> =>
    Number(/^pixiu_batch_recipients_in_progress (\d+)/m.exec((await gw.client.get('/metrics', { headers: { authorization: '' } })).text)?.[1] ?? -1);
  const big = 'x'.repeat(70 * 1024);
  const users = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
  await probe.client('PAUSE', '15000', 'WRITE');
  let answer;
  try {
    // 15 of 20 held: the batch's 10 do not fit, its good items' 5 do.
    const held = [gw.client.post('/v1/messages', { to: users('part-h0', 10), type: 't', data: 0 }), gw.client.post('/v1/messages', { to: users('part-h1', 5), type: 't', data: 0 })];
    await waitUntil('15 recipients in progress', async () => (await inProgress()) === 15);
    const batch = gw.client.post('/v1/messages/batch', { messages: [
      { to: users('part-b0', 3), type: 't', data: big, client_msg_id: 'part-k1' },
      // Its key is free: the item before it, refused for itself, stored nothing.
      { to: users('part-g1', 2), type: 't', data: 1, client_msg_id: 'part-k1' },
      { to: users('part-b2', 2), type: 't', data: big },
      { to: users('part-g3', 3), type: 't', data: 3 },
    ] });
    await waitUntil('the batch\'s good items are in progress too', async () => (await inProgress()) === 20);
    await probe.client('UNPAUSE');
    answer = await batch;
    for (const a of await Promise.all(held)) assert.equal(a.status, 201);
  } finally {
    await probe.client('UNPAUSE');
  }
  assert.equal(answer.status, 200, answer.text);
  assert.deepEqual((answer.body as { results: { status: number }[] }).results.map((r) => r.status), [413, 201, 413, 201]);
  assert.equal(await inProgress(), 0);
  for (const user of ['part-g1-0', 'part-g1-1', 'part-g3-2']) assert.equal((await readWholeInbox(inbox, user)).length, 1, user);
  for (const user of ['part-b0-0', 'part-b2-1']) assert.equal((await readWholeInbox(inbox, user)).length, 0, user);
});

test('ingest checks a room message as the store would, storing nothing: what the route asks when the budget refuses it', async (t) => {
  const store = await openStore(t, await tempDataDir(t));
  const ingest = new Ingest({ store, inbox });
  assert.throws(() => ingest.check({ room: 'r', type: 't', data: 'x'.repeat(70 * 1024), client_msg_id: 'c1' }), (err: PixiuError) => err.code === 'PAYLOAD_TOO_LARGE');
  assert.throws(() => ingest.check({ room: 'r', type: 't', data: 1, client_msg_id: '\n' }), (err: PixiuError) => err.code === 'INVALID_REQUEST');
  ingest.check({ room: 'r', type: 't', data: 'x'.repeat(1000) });
  assert.equal(await store.findByClientMsgId('c1'), null);
});
