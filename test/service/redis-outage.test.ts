/**
 * The service while its Redis is down or stalled (DESIGN.md §7, §11): producers get
 * 503 UNAVAILABLE with Retry-After within the command timeout, readiness fails while
 * liveness holds, and once Redis is back everything works again without restarting
 * the service; a message retried with its client_msg_id ends up exactly once in every
 * inbox.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Inbox } from '../../src/inbox/inbox.js';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList, startInProcess, type HttpAnswer, type PixiuClient } from '../harness/pixiu-server.js';
import type { Redis } from 'ioredis';
import { writeReadinessProbe } from '../../src/redis/readiness-probe.js';
import { createRedis } from '../../src/redis/client.js';
import { expectError, openInbox, readWholeInbox, waitUntil, whenConnected } from '../harness/checks.js';

/** The service's Redis command timeout, short so a stalled Redis is noticed fast. */
const COMMAND_TIMEOUT_MS = 500;
/** Slack for scheduling and HTTP on a loaded test machine. */
const MARGIN_MS = 1000;
/** Longest the service's client may take to reconnect (its back-off tops out at 2 s). */
const RECOVERY_BOUND_MS = 15_000;

let redis: RedisServer;
let client: PixiuClient;
let inbox: Inbox;
/** The test's own connection, under `inbox`. */
let testRedis: Redis;
const files = cleanupList();

before(async () => {
  redis = await RedisServer.start({ aof: true });
  // Registered first, so it runs last, and runs even when an earlier step fails.
  files.after(() => redis.destroy());
  const server = await startInProcess(files, { redisUrl: redis.url, redisCommandTimeoutMs: String(COMMAND_TIMEOUT_MS) });
  client = server.client;
  ({ inbox, redis: testRedis } = await openInbox(files, redis.url));
});

after(() => files.run());

/** Asserts a 503 UNAVAILABLE with Retry-After, answered within the command timeout. */
function expectUnavailable(answer: HttpAnswer): void {
  expectError(answer, 503, 'UNAVAILABLE');
  assert.match(answer.headers.get('retry-after') ?? '', /^\d+$/, 'Retry-After in seconds');
  assert.ok(answer.elapsedMs < COMMAND_TIMEOUT_MS + MARGIN_MS, `answered after ${Math.round(answer.elapsedMs)} ms`);
}

/**
 * Waits, bounded, until the service's /readyz is 200 again (its reconnect has no event
 * we can see), and until the test's own connection is back (its `ready` event).
 */
async function untilReady(): Promise<void> {
  await waitUntil('/readyz is 200', async () => (await client.get('/readyz')).status === 200, RECOVERY_BOUND_MS);
  await whenConnected(testRedis, RECOVERY_BOUND_MS);
}

test('with Redis stopped: POST is 503 with Retry-After, /readyz 503, /healthz 200; after restart it all works', async () => {
  const before = await client.post('/v1/messages', { to: 'ada', type: 't', data: 1 });
  assert.equal(before.status, 201, before.text);
  await redis.stop();
  try {
    expectUnavailable(await client.post('/v1/messages', { to: 'ada', type: 't', data: 2 }));
    const batch = await client.post('/v1/messages/batch', { messages: [{ to: 'ada', type: 't', data: 3 }] });
    assert.equal(batch.status, 200, 'a batch answers per item');
    const items = (batch.body as { results: Array<{ status: number; error?: { code: string } }> }).results;
    assert.deepEqual(items.map((r) => [r.status, r.error?.code]), [[503, 'UNAVAILABLE']]);
    expectUnavailable(await client.get('/v1/users/ada/messages'));
    expectUnavailable(await client.get('/readyz'));
    const health = await client.get('/healthz');
    assert.equal(health.status, 200);
  } finally {
    await redis.restart();
  }
  await untilReady();
  const afterRestart = await client.post('/v1/messages', { to: 'ada', type: 't', data: 5 });
  assert.equal(afterRestart.status, 201, afterRestart.text);
  // AOF kept the first message; the refused ones were never appended.
  assert.deepEqual((afterRestart.body as { recipients: unknown }).recipients, [{ user: 'ada', seq: 2 }]);
});

test('with Redis frozen: POST and /readyz fail as 503 within the command timeout, and work once it thaws', async () => {
  await untilReady();
  redis.pause();
  try {
    expectUnavailable(await client.post('/v1/messages', { to: 'bea', type: 't', data: 1, client_msg_id: 'frozen-1' }));
    expectUnavailable(await client.get('/readyz'));
    assert.equal((await client.get('/healthz')).status, 200);
  } finally {
    redis.resume();
  }
  await untilReady();
  // The timed-out append may have run once Redis thawed; the retry completes it either way.
  const retry = await client.post('/v1/messages', { to: 'bea', type: 't', data: 1, client_msg_id: 'frozen-1' });
  assert.ok(retry.status === 200 || retry.status === 201, retry.text);
  const id = (retry.body as { id: string }).id;
  assert.deepEqual((await readWholeInbox(inbox, 'bea')).map((e) => e.id), [id]);
});

test('the readiness probe\'s write (and PING) goes out at once, not queued behind an auto-pipeline waiting on a frozen Redis', async (t) => {
  await untilReady();
  const probe = await createRedis({ url: redis.url, commandTimeoutMs: COMMAND_TIMEOUT_MS, name: 'pixiu:probe-test' });
  t.after(() => probe.disconnect());
  redis.pause();
  try {
    const stuck = probe.get('anything').catch(() => 'timed out');
    // The GET's pipeline is written on the next turn and waits for Redis from then on.
    await new Promise((resolve) => setImmediate(resolve));
    const ping = probe.ping().catch(() => 'timed out');
    const write = writeReadinessProbe(probe, 'readyz-probe').catch(() => 'timed out');
    assert.equal(probe.autoPipelineQueueSize, 0, 'nothing waits for the pipeline in flight');
    assert.deepEqual(await Promise.all([stuck, ping, write]), ['timed out', 'timed out', 'timed out']);
  } finally {
    redis.resume();
  }
});

test('a POST that failed with 503 while Redis was down, retried after, is in every inbox exactly once', async () => {
  await untilReady();
  const body = { to: ['cai', 'dov', 'eli'], type: 't', data: { n: 1 }, client_msg_id: 'outage-1' };
  await redis.stop();
  try {
    const failed = await client.post('/v1/messages', body);
    expectUnavailable(failed);
    expectUnavailable(await client.post('/v1/messages', body));
  } finally {
    await redis.restart();
  }
  await untilReady();
  const retried = await client.post('/v1/messages', body);
  assert.equal(retried.status, 201, `the retry completed what the first attempt left undone: ${retried.text}`);
  const created = retried.body as { id: string; recipients: unknown; duplicate: boolean };
  assert.equal(created.duplicate, false);
  assert.deepEqual(created.recipients, [{ user: 'cai', seq: 1 }, { user: 'dov', seq: 1 }, { user: 'eli', seq: 1 }]);
  const again = await client.post('/v1/messages', body);
  assert.equal(again.status, 200);
  assert.deepEqual(again.body, { ...created, duplicate: true });
  for (const user of body.to) {
    assert.deepEqual((await readWholeInbox(inbox, user)).map((e) => e.id), [created.id], user);
  }
});
