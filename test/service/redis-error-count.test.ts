/**
 * `pixiu_redis_errors_total{kind="connection"}` counts the connection errors of every
 * Redis connection of the node — the command connection, the bus's subscriber and the
 * broadcast reader — as each is logged (`redis connection error`, `redis refused a
 * command sent on connecting`). It counted the command connection's only: an SRE saw
 * it rise by 4 where 8 such lines were logged. Here only the subscriber's connection is
 * refused (its reconnects meet a password the node does not give), the command
 * connection staying up.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { metricSample, openInbox, waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { startInProcessAlone } from '../harness/pixiu-server.js';

const CONNECTION_ERRORS = 'pixiu_redis_errors_total{kind="connection"}';

test('the bus subscriber\'s connection errors count in pixiu_redis_errors_total{kind="connection"}, as the command connection\'s do', async (t) => {
  const { logger, lines } = capturingLogger();
  const { redis: server, server: { client } } = await startInProcessAlone(t, { redisPrefix: 'buserr:' }, logger);
  const { redis: admin } = await openInbox(t, server.url);
  const count = async (): Promise<number | undefined> => metricSample((await client.get('/metrics')).text, CONNECTION_ERRORS);
  assert.equal(await count(), 0);
  // The admin's own connection stays authenticated (CLIENT KILL skips the caller), and
  // so do the node's connections not killed.
  await admin.config('SET', 'requirepass', 'test-pw-not-given');
  try {
    await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    await waitUntil('the subscriber\'s refusal is logged', () => Promise.resolve(lines.some((l) =>
      l.msg === 'redis refused a command sent on connecting' && String(l.redis).startsWith('pixiu:bus:'))), 10_000, 50);
    await waitUntil('counted', async () => (await count() ?? 0) >= 1, 5_000, 50);
    assert.deepEqual(lines.filter((l) => l.redis === 'pixiu' && l.level >= 40).map((l) => l.msg), [], 'the command connection had no error');
  } finally {
    await admin.config('SET', 'requirepass', '');
  }
});
