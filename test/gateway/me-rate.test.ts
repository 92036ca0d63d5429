/**
 * The per-user request rate of the `/v1/me` routes on one node (ME_REQUEST_LIMIT,
 * src/gateway/user-rate.ts: a burst of 200, then 20 a second), over real HTTP: one
 * token flooding them is refused 429 RATE_LIMITED with `Retry-After` before any Redis
 * call, while another user is answered; a client reading a whole inbox page by page at
 * full speed, acking each page, is never refused.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { RedisServer } from '../harness/redis-server.js';
import { PixiuClient, type HttpAnswer } from '../harness/pixiu-server.js';
import { testToken } from '../harness/ws-client.js';
import { ME_REQUEST_LIMIT } from '../../src/gateway/user-rate.js';
import { JWT_KEY, startGateway, type GatewayFixture } from './gateway-fixture.js';

/** A node of the test's own, on a redis-server of its own. */
async function ownNode(t: TestContext): Promise<{ node: GatewayFixture; redis: RedisServer }> {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  return { node: await startGateway(t, { redisUrl: redis.url, redisCommandTimeoutMs: '500' }), redis };
}

/** A client of the `/v1/me` routes with `user`'s JWT. */
async function me(node: GatewayFixture, user: string): Promise<PixiuClient> {
  return new PixiuClient(node.url, await testToken(JWT_KEY, user));
}

/** The exact refusal of a request over the rate. */
const OVER_RATE = { error: { code: 'RATE_LIMITED', message: 'too many requests to /v1/me for this user on this node (a burst of 200, then 20 a second); retry after 1 s' } };

test('one token flooding POST /v1/me/ack is refused 429 with Retry-After once the burst is spent; another user is answered meanwhile', async (t) => {
  const { node } = await ownNode(t);
  await node.post('flooder');
  const flooder = await me(node, 'flooder');
  let answered = 0;
  let refusal: HttpAnswer | undefined;
  // At 20 a second, some come back while the loop runs: it stops at the first refusal.
  while (refusal === undefined && answered < 2000) {
    const answer = await flooder.post('/v1/me/ack', { device: 'phone', seq: 1 });
    if (answer.status === 429) refusal = answer;
    else {
      assert.equal(answer.status, 200, answer.text);
      answered++;
    }
  }
  assert.ok(refusal, `${answered} acks in a row were answered`);
  assert.ok(answered >= ME_REQUEST_LIMIT.burst, `refused after ${answered}`);
  assert.equal(refusal.headers.get('retry-after'), '1');
  assert.deepEqual(refusal.body, OVER_RATE);
  // The same budget holds the history route; another user's is their own.
  const page = await flooder.get('/v1/me/messages');
  if (page.status === 429) assert.deepEqual(page.body, OVER_RATE);
  const other = await (await me(node, 'bystander')).get('/v1/me/messages');
  assert.equal(other.status, 200, other.text);
});

test('a client reading a whole inbox at full speed, a page of 1 at a time, each page acked, is never refused: 200 requests', async (t) => {
  const { node } = await ownNode(t);
  // 100 pages and 100 acks: what reading a full inbox (10,000, the default cap) in
  // pages of the default limit (100) takes, done as fast as the node answers.
  await node.post('reader', 100);
  const reader = await me(node, 'reader');
  let after = 0;
  for (let page = 0; page < 100; page++) {
    const answer = await reader.get(`/v1/me/messages?after_seq=${after}&limit=1`);
    assert.equal(answer.status, 200, `page ${page}: ${answer.text}`);
    const body = answer.body as { next_after_seq: number; epoch: string };
    after = body.next_after_seq;
    const acked = await reader.post('/v1/me/ack', { device: 'tablet', seq: after, epoch: body.epoch });
    assert.equal(acked.status, 200, `ack ${page}: ${acked.text}`);
  }
  assert.equal(after, 100);
});

test('a request over the rate is refused before any Redis call: 429, not 503, with Redis stopped', async (t) => {
  const { node, redis } = await ownNode(t);
  const flooder = await me(node, 'stalled');
  redis.pause();
  t.after(() => redis.resume());
  // Sent together: the burst's requests wait on Redis and fail 503 (its command
  // timeout, 500 ms here); those past it are refused at once.
  // 300 past the burst: on a loaded machine the send itself can take seconds, and the
  // bucket refills 20 a second meanwhile (a CI run at +60 saw 26 refused, not 30).
  const sent = ME_REQUEST_LIMIT.burst + 300;
  const answers = await Promise.all(Array.from({ length: sent }, () => flooder.post('/v1/me/ack', { device: 'phone', seq: 0 })));
  const statuses = answers.map((a) => a.status);
  const refused = answers.filter((a) => a.status === 429);
  assert.equal(statuses.filter((s) => s !== 429 && s !== 503).length, 0, JSON.stringify(statuses));
  // Refills during the send may admit a few more than the burst.
  assert.ok(refused.length >= 30, `${refused.length} refused of ${sent}`);
  for (const r of refused) assert.deepEqual(r.body, OVER_RATE);
});
