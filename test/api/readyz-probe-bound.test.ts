/**
 * `GET /readyz` bounds its Redis writes whatever the request rate (secaudit F6: each
 * anonymous call was a `PSETEX` in the AOF): calls while a probe is in flight share it,
 * past `PROBE_LIMIT` a call gets the last probe's outcome, and a Redis that goes away is
 * still seen at once (src/api/shared-probe.ts; docs/api.md, "Operations"). Counted with
 * `INFO commandstats` on a private redis-server, the node on a real socket.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { Redis } from 'ioredis';
import { PROBE_LIMIT, SharedReadinessProbe } from '../../src/api/shared-probe.js';
import { createRedis } from '../../src/redis/client.js';
import { cleanupList, startInProcess } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { waitUntil } from '../harness/checks.js';

let redis: RedisServer;
let admin: Redis;
const files = cleanupList();

before(async () => {
  redis = await RedisServer.start();
  files.after(() => redis.destroy());
  admin = await createRedis({ url: redis.url, commandTimeoutMs: 5000, name: 'pixiu:test-admin' });
  files.after(() => admin.quit());
});

after(() => files.run());

/** `PSETEX` commands the Redis of `on` (the test's own unless given) has run since its start (`INFO commandstats`). */
async function psetexCalls(on: Redis = admin): Promise<number> {
  return Number(/^cmdstat_psetex:calls=(\d+)/m.exec(await on.info('commandstats'))?.[1] ?? 0);
}

test('50 concurrent /readyz calls share one PSETEX, and are all answered 200', async (t) => {
  // A command timeout well past the pause below: the held probe must not time out.
  const { client } = await startInProcess(t, { redisUrl: redis.url, redisPrefix: 'shared:', redisCommandTimeoutMs: '30000' });
  const before = await psetexCalls();
  // Writes held by Redis until all 50 calls are in the probe (10 s is only a bound, never
  // waited out): the first call's probe is in flight while every other call arrives,
  // however slowly the machine lets them in. Counted where the route calls the probe.
  const checks = t.mock.method(SharedReadinessProbe.prototype, 'check');
  await admin.call('CLIENT', 'PAUSE', '10000', 'WRITE');
  t.after(() => admin.call('CLIENT', 'UNPAUSE'));
  const answers = Promise.all(Array.from({ length: 50 }, () => client.get('/readyz', { headers: { authorization: '' } })));
  await waitUntil('all 50 calls are waiting on the probe', async () => checks.mock.callCount() === 50);
  await admin.call('CLIENT', 'UNPAUSE');
  assert.deepEqual((await answers).map((a) => a.status), Array(50).fill(200));
  assert.equal(await psetexCalls() - before, 1);
});

test('a flood of /readyz sends at most PROBE_LIMIT\'s probes: its burst, then 2 a second', async (t) => {
  const { client } = await startInProcess(t, { redisUrl: redis.url, redisPrefix: 'flood:' });
  const before = await psetexCalls();
  const startedMs = performance.now();
  let answered = 0;
  // Eight callers, each sending its next call once the last is answered.
  await Promise.all(Array.from({ length: 8 }, async () => {
    for (let i = 0; i < 100; i++) {
      assert.equal((await client.get('/readyz', { headers: { authorization: '' } })).status, 200);
      answered += 1;
    }
  }));
  const seconds = (performance.now() - startedMs) / 1000;
  const bound = PROBE_LIMIT.burst + Math.ceil(seconds * PROBE_LIMIT.perMinute / 60);
  const probes = await psetexCalls() - before;
  assert.equal(answered, 800);
  assert.ok(probes >= 1 && probes <= bound, `${probes} PSETEX for 800 calls in ${seconds.toFixed(2)} s (bound ${bound})`);
});

test('past its rate, a probe is not reused once its connection closed: Redis stopped is seen at once, and back at once', async (t) => {
  const own = await RedisServer.start();
  t.after(() => own.destroy());
  const conn = await createRedis({ url: own.url, commandTimeoutMs: 2000, name: 'pixiu:test-probe' });
  t.after(() => conn.disconnect());
  // One token, refilled once an hour: every call after the first reuses a probe unless it must not.
  const probe = new SharedReadinessProbe(conn, 'test:readyz', { burst: 1, perMinute: 1 / 60 });
  await probe.check();
  await probe.check();
  assert.equal(await psetexCalls(conn), 1, 'the second call reused the first probe');

  const closed = once(conn, 'close');
  await own.stop();
  await closed;
  await assert.rejects(probe.check(), 'Redis stopped: not the probe sent before');

  await own.restart();
  if (conn.status !== 'ready') await once(conn, 'ready');
  await probe.check();
  assert.equal(await psetexCalls(conn), 1, 'a probe of its own on the new connection (Redis restarted: its counts start again)');
});
