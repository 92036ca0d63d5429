/**
 * A Redis that hangs past the store lease's deadline and answers again without the
 * connection dropping (src/cluster/store-ownership.ts): frozen with SIGSTOP, as a link
 * blackholed by a partition or a Redis stalled by a long fork looks to the node (its
 * TCP connection stays, so no reconnect renews the lease at once). Once Redis answers
 * again the node takes writes within {@link RESUME_BOUND_MS}: its renewals past the
 * deadline are tried every second, not every renewal period (netfault's finding: 503
 * for up to ~5 s after the link came back).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LEASE_FENCE_MS, LEASE_RENEW_MS, LEASE_RETRY_MS } from '../../src/cluster/lease-watch.js';
import { waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { startInProcessAlone } from '../harness/pixiu-server.js';

/** How soon after Redis answers again a fenced node takes messages: one retry's wait, and slow round trips (a renewal period without the retries). */
const RESUME_BOUND_MS = LEASE_RETRY_MS + 2500;

test('a Redis hung past the lease deadline, the connection kept: writes resume within about a second of Redis answering again', { timeout: 120_000 }, async (t) => {
  const { logger, lines } = capturingLogger();
  // A short command timeout: the renewals and the POSTs fail fast while Redis is frozen.
  const { redis: server, server: { client } } = await startInProcessAlone(t, { redisCommandTimeoutMs: '500' }, logger);
  const post = (n: number) => client.post('/v1/messages', { to: 'hung-u', type: 't', data: n, client_msg_id: `hung-${n}` });
  assert.equal((await post(0)).status, 201);

  server.pause();
  let frozen = true;
  t.after(() => { if (frozen) server.resume(); });
  // A renewal that fails past the deadline (fenced from then on); the next try is a second away, not a renewal period.
  const fencedFailures = (): number => lines.filter((l) => l.msg === 'store lease renewal failed' && l.writesFenced === true).length;
  await waitUntil('a renewal failed past the deadline', () => Promise.resolve(fencedFailures() > 0), LEASE_FENCE_MS + LEASE_RENEW_MS + 10_000, 20);
  server.resume();
  frozen = false;
  const answeredAt = performance.now();
  let n = 10;
  await waitUntil('a message is stored again', async () => (await post(n++)).status === 201, LEASE_RENEW_MS + 10_000, 50);
  const resumedMs = performance.now() - answeredAt;
  assert.ok(resumedMs <= RESUME_BOUND_MS, `writes resumed ${Math.round(resumedMs)} ms after Redis answered again (bound ${RESUME_BOUND_MS} ms)`);
  assert.equal((await client.get('/readyz')).status, 200);
});
