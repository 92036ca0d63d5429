/**
 * How `GET /readyz`'s "not ready" is logged (docs/api.md, Operations): its 503 is the
 * probe's answer — a node starting, Redis down — asked every few seconds, so it is a
 * debug line (`not ready`, with the reason), not the warning `request unavailable` of a
 * request an outage failed; and it takes no share of that warning's thinning, so the
 * first real request refused 503 in the outage is still logged at warn.
 * The real service in this process, its log captured from a pino destination.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startInProcessAlone } from '../harness/pixiu-server.js';
import { expectError } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';

test('/readyz answering 503 (Redis down) logs no warning, at debug "not ready"; a real request refused 503 then still warns', async (t) => {
  const { logger, lines } = capturingLogger();
  const { redis, server: { client } } = await startInProcessAlone(t, { redisCommandTimeoutMs: '300' }, logger);
  assert.equal((await client.get('/readyz')).status, 200);
  await redis.stop();
  const from = lines.length;
  let refused;
  let probed;
  try {
    for (let i = 0; i < 3; i += 1) expectError(await client.get('/readyz'), 503, 'UNAVAILABLE', /^Redis /);
    assert.equal((await client.request('HEAD', '/readyz')).status, 503);
    probed = lines.slice(from);
    refused = await client.get('/v1/users/ada/messages');
  } finally {
    await redis.restart();
  }
  expectError(refused, 503, 'UNAVAILABLE');
  // (Other warnings of the outage, the Redis client's, may come meanwhile: not the probes'.)
  assert.deepEqual(probed.filter((l) => l.msg === 'request unavailable'), [], 'no warning for a probe answered 503');
  const logged = lines.slice(from);
  const notReady = logged.filter((l) => l.msg === 'not ready');
  assert.equal(notReady.length, 4, JSON.stringify(logged));
  for (const line of notReady) {
    assert.equal(line.level, 20, 'debug');
    assert.match(String(line.reason), /^Redis /);
  }
  // The history request's 503 warns: the probes took no share of the 10 s thinning.
  const warned = lines.slice(from + probed.length).filter((l) => l.msg === 'request unavailable');
  assert.equal(warned.length, 1, JSON.stringify(warned));
  assert.equal(warned[0]?.level, 40);
  assert.equal(warned[0]?.notLogged, undefined, 'no 503 left out before it');
});
