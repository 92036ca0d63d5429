/**
 * `pixiu serve` stopped while its Redis is down (DESIGN.md §6): the store's counters
 * cannot be recorded, and the operator is told so once, by the record made after the
 * store closed (service.ts, step 'store counters'); the interim record the lease's stop
 * makes first (store-ownership.ts `stop`) fails at debug level only. The process still
 * exits 0.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { waitUntil } from '../harness/checks.js';
import { spawnServe, tempDataDir } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { logLines } from '../harness/log-capture.js';

const COUNTERS_NOT_RECORDED = 'could not record the store\'s counters';

test('SIGTERM with Redis stopped: one warning that the store\'s counters could not be recorded (the final record\'s), the interim one at debug; exit 0', { timeout: 60_000 }, async (t: TestContext) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const serve = await spawnServe({
    PIXIU_REDIS_URL: redis.url, PIXIU_DATA_DIR: await tempDataDir(t, 'pixiu-down-stop-'), PIXIU_PORT: '0',
    PIXIU_API_TOKEN: 'shutdown-down-test-api-token-0123456789', PIXIU_LOG_LEVEL: 'debug',
  }, t);
  await redis.stop();
  // The service has seen its connection go: every command now fails at once.
  await waitUntil('the redis connection error line', async () => logLines(serve.stdout(), 'redis connection error').length > 0, 10_000);

  assert.deepEqual(await serve.term(), { code: 0, signal: null }, serve.stderr());
  // Both records failed: one warning, one debug line (the lines of the shutdown's
  // steps may reach stdout out of order, so their order is not checked).
  const levels = logLines(serve.stdout(), COUNTERS_NOT_RECORDED).map((l) => l.level).sort((a, b) => a - b);
  assert.deepEqual(levels, [20, 40], serve.stdout());
  assert.equal(logLines(serve.stdout(), 'pixiu stopped').length, 1);
});
