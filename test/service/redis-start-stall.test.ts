/**
 * A Redis that stalls while a node starts (walk29 F9; src/service/redis-start.ts
 * `START_STALL_WAIT_MS`, README "Running with your own Redis"): one that took the
 * connection and does not answer within the command timeout (here `CLIENT PAUSE`, as
 * a failover or a long command would hold it) is waited for, one warn line saying so,
 * and the start goes on once it answers — it ended the start (exit 1, "cannot reach
 * Redis … Command timed out") where Redis had been reached.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { RedisServer } from '../harness/redis-server.js';
import { startInProcess } from '../harness/pixiu-server.js';
import { capturingLogger } from '../harness/log-capture.js';

test('a Redis paused for 2.5 s as the start connects is waited for with one warn line, and the node starts', { timeout: 60_000 }, async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const admin = new Redis(redis.url);
  t.after(() => admin.disconnect());
  const { logger, lines } = capturingLogger();
  await admin.call('CLIENT', 'PAUSE', '2500', 'ALL');
  const began = Date.now();
  const { client } = await startInProcess(t, { redisUrl: redis.url, redisCommandTimeoutMs: '300', logLevel: 'info' }, logger);
  assert.ok(Date.now() - began >= 2000, `started after ${Date.now() - began} ms, within the pause`);
  const waits = lines.filter((l) => l.msg?.startsWith('Redis did not answer at start') === true);
  assert.equal(waits.length, 1, JSON.stringify(lines));
  assert.match(String(waits[0]?.reason), /took the connection but did not answer within the command timeout \(300 ms\)/);
  assert.ok(lines.some((l) => l.msg === 'Redis answers again: the start goes on'), JSON.stringify(lines));
  assert.equal((await client.get('/readyz')).status, 200);
});

test('a Redis that stalls later in the start (writes paused) ends it naming the step and the Redis, not the API\'s "retry later"', { timeout: 60_000 }, async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const admin = new Redis(redis.url);
  t.after(() => admin.disconnect());
  // Reads answer (the connect, the version check), the first write does not: the store's
  // claim, as Redis's own FAILOVER pauses writes (walk30 F1).
  await admin.call('CLIENT', 'PAUSE', '12000', 'WRITE');
  await assert.rejects(startInProcess(t, { redisUrl: redis.url, redisCommandTimeoutMs: '300' }), (err: Error) => {
    assert.equal(err.name, 'StartupError');
    assert.match(err.message, new RegExp(`^the start failed while claiming the store \\(Redis at ${redis.url.replace(/[.]/g, '\\.')} did not answer `
      + 'within the command timeout, 300 ms\\): start it again once Redis answers$'));
    return true;
  });
});
