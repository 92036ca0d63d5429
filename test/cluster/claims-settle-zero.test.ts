/**
 * `PIXIU_CLAIMS_SETTLE=0` turns off the wait for partition claims to settle, which is
 * for one node per Redis (docs/decisions.md, "Several nodes"): a node started with it
 * beside running nodes warns at start, naming the risk; alone on its Redis it says
 * nothing (a black-box SRE found the setting accepted silently beside other nodes).
 * Real nodes on a real private Redis.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { logLines } from '../harness/log-capture.js';
import { cleanupList, spawnServe, tempDataDir } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

const WARNING = /^PIXIU_CLAIMS_SETTLE is 0 while other nodes run on this Redis: .*0 is for one node per Redis/;

test('a node started with PIXIU_CLAIMS_SETTLE=0 warns when other nodes run on its Redis, and not when it is alone', { timeout: 120_000 }, async (t) => {
  const files = cleanupList();
  t.after(() => files.run());
  const redis = await RedisServer.start();
  files.after(() => redis.destroy());
  const env = async (): Promise<Record<string, string>> => ({
    PIXIU_REDIS_URL: redis.url, PIXIU_DATA_DIR: await tempDataDir(files), PIXIU_PORT: '0', PIXIU_CLAIMS_SETTLE: '0',
    PIXIU_API_TOKEN: 'claims-settle-token-0123456789', PIXIU_JWT_SECRET: 'claims-settle-jwt-secret-0123456789abcdef', PIXIU_LOG_LEVEL: 'info',
  });
  const alone = await spawnServe(await env(), t);
  const warnings = (stdout: string): string[] => stdout.split('\n').flatMap((l) => {
    try {
      const entry = JSON.parse(l) as { level?: number; msg?: string };
      return entry.level === 40 && typeof entry.msg === 'string' && WARNING.test(entry.msg) ? [entry.msg] : [];
    } catch {
      return [];
    }
  });
  assert.deepEqual(warnings(alone.stdout()), [], 'alone on its Redis: no warning');
  assert.equal(logLines(alone.stdout(), 'pixiu listening').length, 1);
  const beside = await spawnServe(await env(), t);
  assert.equal(warnings(beside.stdout()).length, 1, beside.stdout());
  assert.equal((await beside.term()).code, 0);
  assert.equal((await alone.term()).code, 0);
});
