/**
 * A message with `client_msg_id` on a Redis that other stores share (its claim,
 * src/cluster/client-id-claims.ts; DESIGN.md §9), while that Redis is hung (SIGSTOP):
 * the 503 comes within the command timeout, as for a message without one (docs/api.md,
 * 503). A store counts as sharing the Redis once it was claimed there, even when its
 * node is stopped now: here a second node ran on the same Redis and stopped, as in the
 * chaos tester's run (finding F2: answers took up to 1.6 command timeouts, the claim
 * waiting behind the auto-pipeline in flight before it went out).
 *
 * And the claim that timed out there: Redis writes it when it thaws, and the node that
 * made it drops it then (compare-and-delete), so a retry on another node is stored at
 * once instead of being refused as "being stored by another node" for the claim's 30 s.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { RedisServer } from '../harness/redis-server.js';
import { startInProcess, type HttpAnswer } from '../harness/pixiu-server.js';
import { expectError, openInbox, readWholeInbox, waitUntil } from '../harness/checks.js';

/**
 * The service's Redis command timeout, and the slack on it for scheduling and HTTP on
 * a loaded 2-core machine: less than a second timeout, so a claim that waited out
 * another command's timeout before its own shows.
 */
const COMMAND_TIMEOUT_MS = 1500;
const MARGIN_MS = 1000;

test('with a shared Redis frozen, messages with client_msg_id at ~30/s are each answered 503 within the command timeout', async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  // A node that ran on this Redis and stopped: its store stays claimed there.
  const first = await startInProcess(t, { redisUrl: redis.url });
  await first.service.close();
  const { client } = await startInProcess(t, { redisUrl: redis.url, redisCommandTimeoutMs: String(COMMAND_TIMEOUT_MS) });
  const ok = await client.post('/v1/messages', { to: 'ada', type: 't', data: 0, client_msg_id: 'warm-0' });
  assert.equal(ok.status, 201, ok.text);
  redis.pause();
  let answers: HttpAnswer[];
  try {
    // One every 33 ms (the tester's ~30/s) for 2 s, past one command timeout: some are
    // made while the first claim waits.
    const sent: Array<Promise<HttpAnswer>> = [];
    for (let i = 0; i < 60; i++) {
      sent.push(client.post('/v1/messages', { to: i % 2 === 0 ? 'ada' : ['ada', 'bea'], type: 't', data: i, client_msg_id: `hung-${i}` }));
      await delay(33);
    }
    answers = await Promise.all(sent);
  } finally {
    redis.resume();
  }
  for (const answer of answers) expectError(answer, 503, 'UNAVAILABLE');
  const slowest = Math.max(...answers.map((a) => a.elapsedMs));
  assert.ok(slowest < COMMAND_TIMEOUT_MS + MARGIN_MS, `slowest 503 after ${Math.round(slowest)} ms (command timeout ${COMMAND_TIMEOUT_MS} ms)`);
  await waitUntil('/readyz is 200', async () => (await client.get('/readyz')).status === 200, 15_000);
});

test('a claim that timed out on a frozen shared Redis is dropped once Redis answers: the retry on another node is stored at once, not 503 for the claim\'s 30 s', async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  // A node that ran on this Redis and stopped: A and B see it shared from their start.
  const first = await startInProcess(t, { redisUrl: redis.url });
  await first.service.close();
  const a = await startInProcess(t, { redisUrl: redis.url, redisCommandTimeoutMs: '500' });
  const b = await startInProcess(t, { redisUrl: redis.url });
  const body = { to: 'frozen-user', type: 't', data: { n: 1 }, client_msg_id: 'frozen-claim-1' };
  redis.pause();
  let onA: HttpAnswer;
  try {
    // A's first Redis command for it is the claim (SET NX GET): it times out, and Redis
    // runs it when it thaws, writing A's pending mark.
    onA = await a.client.post('/v1/messages', body);
  } finally {
    redis.resume();
  }
  expectError(onA, 503, 'UNAVAILABLE');
  // The producer retries on another node, after Retry-After (1 s) or sooner: stored
  // within 3 s of the thaw, not refused as "being stored by another node" for 30 s.
  const deadline = performance.now() + 3000;
  let onB = await b.client.post('/v1/messages', body);
  while (onB.status === 503 && performance.now() < deadline) {
    await delay(250);
    onB = await b.client.post('/v1/messages', body);
  }
  assert.equal(onB.status, 201, onB.text);
  const stored = onB.body as { id: string; duplicate: boolean };
  assert.equal(stored.duplicate, false);
  // A retry on A now is answered with B's message: stored once.
  const again = await a.client.post('/v1/messages', body);
  assert.equal(again.status, 200, again.text);
  const dup = again.body as { id: string; duplicate: boolean };
  assert.deepEqual([dup.id, dup.duplicate], [stored.id, true]);
  const { inbox } = await openInbox(t, redis.url);
  assert.deepEqual((await readWholeInbox(inbox, 'frozen-user')).map((e) => e.id), [stored.id], 'appended once');
});
