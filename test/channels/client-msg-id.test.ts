/**
 * `client_msg_id` on `POST /v1/channels/{channel}/publish` (docs/api.md "Channels",
 * docs/decisions.md "Channels"): a producer's retry publishes once per channel.
 *
 * - The same key with the same content: `200`, the same `id`, `duplicate: true`; the
 *   history holds one entry, a subscriber gets one `pub`. The key is the channel's:
 *   on another channel it is a new publication. Its marker expires with the history.
 * - The same key with another type or data: `409`, nothing published.
 * - 20 identical POSTs at once: one entry, one frame, one id.
 * - The publish ran but its reply was lost (Redis takes no writes for 2.5 s, CLIENT
 *   PAUSE WRITE, past a 1 s command timeout: 503): the retry is `200`, `duplicate: true`.
 * - A malformed key is 400 naming the rule; without a key each POST publishes.
 *
 * A private redis-server and the service in this process, over HTTP and WebSocket.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import { expectError, openInbox, waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import type { HttpAnswer } from '../harness/pixiu-server.js';
import type { TestClient } from '../harness/ws-client.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { connectWith, expectPub, publish, subscribe } from './channel-fixture.js';

const P = 'chk:';
const keys = new Keys(P);
/** The history's (and the marker's) lifetime after a publication. */
const HISTORY_TTL_MS = 3_600_000;
let gw: GatewayFixture;
let probe: Redis;
let follower: TestClient;

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, {
    redisUrl: redis.url, redisPrefix: P, storeDurability: 'relaxed', redisCommandTimeoutMs: '1000', channelHistoryTtlMs: String(HISTORY_TTL_MS),
  });
  probe = (await openInbox(cleanup, redis.url, P)).redis;
  follower = await connectWith(gw, 'follower', ['news.*']);
  for (const channel of ['news.a', 'news.b', 'news.c', 'news.d', 'news.e']) await subscribe(follower, channel);
});

/** A publication's answer. */
interface Published {
  id: string;
  duplicate: boolean;
}

function post(channel: string, body: Record<string, unknown>): Promise<HttpAnswer> {
  return gw.client.post(`/v1/channels/${channel}/publish`, body);
}

/** The ids in `channel`'s history. */
async function historyOf(channel: string): Promise<string[]> {
  return (await probe.xrange(keys.channelHistory(channel), '-', '+')).map(([id]) => id);
}

/** Asserts the follower's next frames are the publications `ids` on `channel` with `data`, then a marker published now: nothing twice. */
async function followerGetsOnly(channel: string, ids: readonly string[], data: unknown): Promise<void> {
  for (const id of ids) await expectPub(follower, channel, id, data);
  const marker = await publish(gw.client, channel, 'marker');
  await expectPub(follower, channel, marker, 'marker');
}

test('the same client_msg_id with the same publication again: 200, the same id, duplicate: true, published once; on another channel it is another publication', async () => {
  const body = { type: 'chat.line', data: { text: 'hi', n: 1 }, client_msg_id: 'line-1' };
  const first = await post('news.a', body);
  assert.equal(first.status, 201, first.text);
  const created = first.body as Published;
  assert.equal(created.duplicate, false);
  // Object keys in another order: the same data.
  const again = await post('news.a', { ...body, data: { n: 1, text: 'hi' } });
  assert.deepEqual([again.status, again.body], [200, { id: created.id, duplicate: true }]);
  assert.deepEqual(await historyOf('news.a'), [created.id]);
  await followerGetsOnly('news.a', [created.id], body.data);
  const pttl = await probe.pttl(keys.channelMarker('news.a', 'line-1'));
  assert.ok(pttl > HISTORY_TTL_MS - 60_000 && pttl <= HISTORY_TTL_MS, `the marker expires with the history: ${pttl} ms`);

  const elsewhere = await post('news.b', body);
  assert.equal(elsewhere.status, 201, elsewhere.text);
  await followerGetsOnly('news.b', [(elsewhere.body as Published).id], body.data);
});

test('the same client_msg_id with another type or data is 409 naming the first publication; nothing is published', async () => {
  const body = { type: 'chat.line', data: { n: 1 }, client_msg_id: 'line-conflict' };
  const created = (await post('news.c', body)).body as Published;
  for (const other of [{ type: 'chat.other' }, { data: { n: 2 } }, { data: [1] }]) {
    expectError(await post('news.c', { ...body, ...other }), 409, 'CONFLICT',
      new RegExp(`^client_msg_id "line-conflict" was first used on channel news\\.c for another publication \\(${created.id}: its type or data differ\\); nothing was published\\. `
        + `If this is a retry of that publication, it was published as ${created.id}: to retry, send the very same body; a new client_msg_id is for a different publication$`));
  }
  assert.deepEqual(await historyOf('news.c'), [created.id]);
  await followerGetsOnly('news.c', [created.id], body.data);
});

test('20 identical POSTs at once: one history entry, one id, the follower gets it once', async () => {
  const body = { type: 'chat.line', data: 'flash', client_msg_id: 'line-flash' };
  const answers = await Promise.all(Array.from({ length: 20 }, () => post('news.d', body)));
  const ids = new Set(answers.map((a) => {
    assert.ok(a.status === 200 || a.status === 201, a.text);
    return (a.body as Published).id;
  }));
  assert.equal(ids.size, 1);
  assert.equal(answers.filter((a) => a.status === 201).length, 1, 'one of them published it');
  assert.deepEqual(await historyOf('news.d'), [...ids]);
  await followerGetsOnly('news.d', [...ids], 'flash');
});

test('the publish ran but its reply was lost (a command timeout): the retry is 200, duplicate: true, and publishes nothing', async () => {
  const body = { type: 'chat.line', data: 'stalled', client_msg_id: 'line-stalled' };
  await probe.client('PAUSE', '2500', 'WRITE');
  const first = await post('news.e', body);
  assert.equal(first.status, 503, first.text);
  let retry = first;
  await waitUntil('a retry is answered other than 503', async () => {
    retry = await post('news.e', body);
    return retry.status !== 503;
  }, 10_000, 100);
  assert.equal(retry.status, 200, retry.text);
  const answered = retry.body as Published;
  assert.equal(answered.duplicate, true);
  assert.deepEqual(await historyOf('news.e'), [answered.id]);
  await followerGetsOnly('news.e', [answered.id], 'stalled');
});

test('a malformed client_msg_id is 400 naming the rule; without one each POST publishes (201, duplicate: false)', async () => {
  expectError(await post('news.x', { type: 't', data: 1, client_msg_id: 'k'.repeat(129) }), 400, 'INVALID_REQUEST',
    /^body\/client_msg_id must be 1–128 printable ASCII characters \(space to ~\)/);
  expectError(await post('news.x', { type: 't', data: 1, client_msg_id: 'cl\u00e9' }), 400, 'INVALID_REQUEST', /^body\/client_msg_id must be 1–128 printable ASCII/);
  assert.deepEqual(await historyOf('news.x'), []);
  const body = { type: 't', data: 1 };
  const one = await post('news.x', body);
  const two = await post('news.x', body);
  for (const a of [one, two]) assert.deepEqual([a.status, (a.body as Published).duplicate], [201, false], a.text);
  assert.deepEqual(await historyOf('news.x'), [(one.body as Published).id, (two.body as Published).id]);
});
