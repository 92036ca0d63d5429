/**
 * A Redis that starts requiring a password under a running node (src/redis/client.ts
 * `connectRefusal`, src/redis/plain-reasons.ts `connectRefusalWords`), against a
 * private redis-server given a `requirepass` at runtime and the node's connections
 * killed: every reconnect is refused NOAUTH, and the commands sent meanwhile fail as a
 * lost connection. `/readyz` says that Redis requires a password (it said "Redis does
 * not answer": a black-box SRE's finding), so does the fenced store once the lease
 * deadline passes, and the client's warning names the refusal again while it lasts,
 * thinned, not once per connection only.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LEASE_FENCE_MS } from '../../src/cluster/lease-watch.js';
import { OUTAGE_LOG_INTERVAL_MS } from '../../src/log-throttle.js';
import { expectError, openInbox, waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { startInProcessAlone } from '../harness/pixiu-server.js';

const NEEDS_PASSWORD = /^Redis refuses this node's connection: it requires a password, which PIXIU_REDIS_URL does not give \(NOAUTH; give it as redis:\/\/:password@host:port/;

/** The message of a 503 `/readyz`, or undefined when it answered otherwise. */
async function notReady(client: { get(path: string): Promise<{ status: number; body: unknown }> }): Promise<string | undefined> {
  const answer = await client.get('/readyz');
  return answer.status === 503 ? (answer.body as { error: { message: string } }).error.message : undefined;
}

test('a Redis that starts requiring a password: /readyz and the fenced store name it while it lasts, and the refusal is logged again, thinned', async (t) => {
  const { logger, lines } = capturingLogger();
  const { redis: server, server: { client } } = await startInProcessAlone(t, { redisPrefix: 'noauth:' }, logger);
  const { redis: admin } = await openInbox(t, server.url);
  assert.equal((await client.get('/readyz')).status, 200);
  // The admin's own connection stays authenticated (CLIENT KILL skips the caller).
  await admin.config('SET', 'requirepass', 'test-pw-not-given');
  try {
    await admin.call('CLIENT', 'KILL', 'TYPE', 'normal');
    await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    const readyzSince = performance.now();
    await waitUntil('/readyz names the password', async () => NEEDS_PASSWORD.test(await notReady(client) ?? ''), 10_000, 100);
    expectError(await client.get('/readyz'), 503, 'UNAVAILABLE', NEEDS_PASSWORD);

    // Past the lease deadline the store's fence names it too, where /readyz looks first.
    const fenced = /^the message store takes no messages now: message store writes are suspended: Redis refuses this node's connection: it requires a password/;
    await waitUntil('the fenced store names the password', async () => fenced.test(await notReady(client) ?? ''), LEASE_FENCE_MS + 5000, 200);

    // The main client's refusal, logged when it began and again after the interval, with how many were left out.
    await waitUntil('the refusal logged again', () => Promise.resolve(
      lines.filter((l) => l.msg === 'redis refused a command sent on connecting' && l.redis === 'pixiu').length >= 2,
    ), Math.max(0, OUTAGE_LOG_INTERVAL_MS - (performance.now() - readyzSince)) + 5000, 100);
    const refusals = lines.filter((l) => l.msg === 'redis refused a command sent on connecting' && l.redis === 'pixiu');
    assert.match(String(refusals[1]?.reason), /^NOAUTH/);
    assert.ok(Number(refusals[1]?.notLogged) >= 1, JSON.stringify(refusals));
  } finally {
    await admin.config('SET', 'requirepass', '');
  }
  await waitUntil('ready again', async () => (await client.get('/readyz')).status === 200, 10_000, 100);
});
