/**
 * A Redis full past the store lease's deadline (src/store/write-fence.ts,
 * src/cluster/store-ownership.ts), against a private redis-server under `maxmemory`
 * with `noeviction`: Redis answers the lease renewals, refusing them (OOM), so once
 * {@link LEASE_FENCE_MS} have passed the fenced writes' 503 and `/readyz` still say
 * that Redis is out of memory — not that Redis did not answer or the process was
 * paused (a black-box SRE's finding) — and once Redis takes writes again they resume
 * within {@link RESUME_BOUND_MS}, not at the next 5 s renewal.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LEASE_FENCE_MS, LEASE_RENEW_MS, LEASE_RETRY_MS } from '../../src/cluster/lease-watch.js';
import { expectError, openInbox, waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { startInProcessAlone } from '../harness/pixiu-server.js';

/** How soon after Redis takes writes again a fenced node takes messages: one retry's wait, and a slow renewal's round trips. */
const RESUME_BOUND_MS = LEASE_RETRY_MS + 1500;

const FULL_FENCE = /^message store writes are suspended: Redis refuses writes: it is out of memory \(maxmemory\), so this node's store lease could not be renewed in time; writes resume once Redis takes a renewal/;

test('a Redis full past the lease deadline: the fenced 503 and /readyz keep "out of memory", and writes resume within about a second of Redis taking writes again', async (t) => {
  const { logger, lines } = capturingLogger();
  const { redis: server, server: { client } } = await startInProcessAlone(t, { redisPrefix: 'full-fence:' }, logger);
  const { redis: admin } = await openInbox(t, server.url);
  const post = (n: number) => client.post('/v1/messages', { to: 'full-u', type: 't', data: n, client_msg_id: `full-${n}` });
  assert.equal((await post(0)).status, 201);

  await admin.config('SET', 'maxmemory-policy', 'noeviction');
  await admin.config('SET', 'maxmemory', '1');
  const filledAt = performance.now();
  // Before the deadline: Redis's refusal of the append itself.
  expectError(await post(1), 503, 'UNAVAILABLE', /^Redis refuses writes: it is out of memory \(maxmemory\); the message may have been stored and appended anyway: retry later with the same client_msg_id, /);

  // Past it: the store refuses the put first, and says why in Redis's words.
  await waitUntil('the store fenced its writes', async () => {
    const answer = await post(2);
    return answer.status === 503 && /^message store writes are suspended/.test((answer.body as { error: { message: string } }).error.message);
  }, LEASE_FENCE_MS + 5000, 200);
  // The deadline counts from the last renewal that confirmed the lease, up to one renewal period before Redis filled.
  assert.ok(performance.now() - filledAt >= LEASE_FENCE_MS - LEASE_RENEW_MS - 100, 'not before the deadline');
  expectError(await post(3), 503, 'UNAVAILABLE', FULL_FENCE);
  const ready = await client.get('/readyz');
  const readyMessage = expectError(ready, 503, 'UNAVAILABLE', /^the message store takes no messages now: /);
  assert.match(readyMessage.replace(/^the message store takes no messages now: /, ''), FULL_FENCE);
  assert.doesNotMatch(readyMessage, /did not answer|paused/);

  // Lift right after a renewal failed past the deadline: the next try is a second away, not a renewal period.
  const fencedFailures = (): number => lines.filter((l) => l.msg === 'store lease renewal failed' && l.writesFenced === true).length;
  const seen = fencedFailures();
  await waitUntil('a renewal failed past the deadline', () => Promise.resolve(fencedFailures() > seen), LEASE_RENEW_MS + 3000, 20);
  await admin.config('SET', 'maxmemory', '0');
  const liftedAt = performance.now();
  let n = 10;
  await waitUntil('a message is stored again', async () => (await post(n++)).status === 201, LEASE_RENEW_MS + 5000, 50);
  const resumedMs = performance.now() - liftedAt;
  assert.ok(resumedMs <= RESUME_BOUND_MS, `writes resumed ${Math.round(resumedMs)} ms after Redis took writes again (bound ${RESUME_BOUND_MS} ms)`);
  assert.equal((await client.get('/readyz')).status, 200);
});
