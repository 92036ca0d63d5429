/**
 * A broadcast whose first attempt failed part-way, retried with its `client_msg_id`
 * (docs/api.md "Broadcast", docs/decisions.md "Broadcast"), is published exactly once:
 *
 * - the append ran but its reply was lost: Redis takes no writes for 1 s (CLIENT PAUSE
 *   WRITE) with a command timeout of 300 ms, so the POST is 503 and Redis appends it
 *   once the pause ends; the retry finds the marker the append set with it — `200`,
 *   `duplicate: true`, nothing appended again;
 * - the store put was done and Redis was down: the POST is 503; once Redis is back,
 *   the retry is answered with the stored broadcast (no second record) and appends it,
 *   `201`; a retry after that is `200`, `duplicate: true`.
 *
 * Either way the stream holds one entry of it and a connected client gets it once.
 * A private redis-server with AOF (the stream outlives the restart) and the service in
 * this process, one store partition so that MsgID counters count the records stored.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { decodeMsgId } from '../../src/ids/msg-id.js';
import { openInbox, waitUntil, whenConnected } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import type { HttpAnswer } from '../harness/pixiu-server.js';
import type { RedisServer } from '../harness/redis-server.js';
import type { TestClient } from '../harness/ws-client.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { entriesOf, expectFrame, getsOnly, postBroadcast, type Answered } from './broadcast-fixture.js';

let redis: RedisServer;
let gw: GatewayFixture;
let probe: Redis;
let client: TestClient;

fileRedis(async (ctx) => {
  ({ redis } = ctx);
  gw = await startGateway(ctx.cleanup, { redisUrl: redis.url, storeDurability: 'relaxed', redisCommandTimeoutMs: '300', partitions: '1' });
  probe = (await openInbox(ctx.cleanup, redis.url)).redis;
  client = await gw.connect('watcher');
  await expectFrame(client, 'welcome');
}, { aof: true });

function post(body: Record<string, unknown>): Promise<HttpAnswer> {
  return gw.client.post('/v1/broadcast', body);
}

/** Retries `body` until the answer is not 503 (Redis back, or writing again). */
async function retryUntilDone(body: Record<string, unknown>): Promise<HttpAnswer> {
  let answer: HttpAnswer | undefined;
  await waitUntil('a retry is answered other than 503', async () => {
    answer = await post(body);
    return answer.status !== 503;
  }, 20_000, 100);
  return answer as HttpAnswer;
}

test('the append ran but its reply was lost (a command timeout): the retry is 200, duplicate: true, and appends nothing', async () => {
  const body = { type: 'test.news', data: { stalled: 1 }, client_msg_id: 'stalled-1' };
  await probe.client('PAUSE', '1000', 'WRITE');
  const first = await post(body);
  assert.equal(first.status, 503, first.text);
  const retry = await retryUntilDone(body);
  // The first attempt's append ran when the pause ended: the retry found its marker.
  assert.equal(retry.status, 200, retry.text);
  const answered = retry.body as Answered;
  assert.equal(answered.duplicate, true);
  assert.deepEqual(await entriesOf(probe, answered.id), [answered.bseq], 'one stream entry');
  await getsOnly(gw.client, client, [answered.bseq], 20_000);
});

test('the store put was done and Redis was down: once Redis is back the retry appends the stored broadcast, once', { timeout: 60_000 }, async () => {
  const before = await postBroadcast(gw.client, { type: 'test.news', data: 'before' });
  await getsOnly(gw.client, client, [before.bseq], 20_000);
  const body = { type: 'test.news', data: { outage: 1 }, client_msg_id: 'outage-1' };
  await redis.stop();
  // Once the node has seen its connection drop: a command written just before it saw
  // that would be sent again when Redis is back (ioredis resends once), and its append
  // would run then — the other case, above.
  await waitUntil('the node is not ready without Redis', async () => (await gw.client.get('/readyz')).status === 503);
  const first = await post(body);
  assert.equal(first.status, 503, first.text);
  await redis.restart();
  const retry = await retryUntilDone(body);
  // It had to append it: a completion, not a duplicate.
  assert.equal(retry.status, 201, retry.text);
  const answered = retry.body as Answered;
  assert.equal(answered.duplicate, false);
  // The record the first attempt stored (`before`, then clientGetsOnly's marker, then it), not a second one.
  assert.equal(decodeMsgId(answered.id).counter, decodeMsgId(before.id).counter + 2, 'the first attempt\'s record');
  const again = await post(body);
  assert.deepEqual([again.status, again.body], [200, { ...answered, duplicate: true }]);
  // The probe reconnects on its own back-off, which may end after the node's clients'
  // (its offline queue is off: a read before it is back fails at once).
  await whenConnected(probe);
  assert.deepEqual(await entriesOf(probe, answered.id), [answered.bseq], 'one stream entry');
  // The entry is the stored record's, time included: the first attempt's, seconds before the retry's.
  const record = await gw.client.get(`/v1/messages/${answered.id}`);
  assert.equal(record.status, 200, record.text);
  const [[, fields] = ['', []]] = await probe.xrange('px:broadcast', answered.bseq, answered.bseq);
  assert.equal(Number(fields[fields.indexOf('s') + 1]), (record.body as { ts: number }).ts, 'the entry carries the stored record\'s ts');
  await getsOnly(gw.client, client, [answered.bseq], 20_000);
});
