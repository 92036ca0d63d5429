/**
 * A message with `client_msg_id` on a Redis that other stores share (its claim,
 * src/cluster/client-id-claims.ts; DESIGN.md §9), while that Redis is hung (SIGSTOP):
 * the 503 comes within the command timeout, as for a message without one (docs/api.md,
 * 503). A store counts as sharing the Redis once it was claimed there, even when its
 * node is stopped now: here a second node ran on the same Redis and stopped, as in the
 * chaos tester's run (finding F2: answers took up to 1.6 command timeouts, the claim
 * waiting behind the auto-pipeline in flight before it went out).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { RedisServer } from '../harness/redis-server.js';
import { startInProcess, type HttpAnswer } from '../harness/pixiu-server.js';
import { expectError, waitUntil } from '../harness/checks.js';

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
