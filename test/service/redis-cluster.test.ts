/**
 * A node pointed at a Redis in cluster mode is refused at start, at once, with a final
 * message naming the URL and saying Redis Cluster is not supported (src/redis/
 * version-check.ts `redisModeProblem`; docs/decisions.md "Redis Cluster"). Before, it
 * exited after 0.5 s with "Redis Cluster is down; retry later" (no slot served) or
 * "Redis is unavailable, retry later" (a MOVED reply), and retrying never helped
 * (walk28 F4). A real `redis-server --cluster-enabled yes`: one node, first with no
 * slots, then serving all 16,384 (where the start used to run, by chance).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { cleanupList, runCli, tempDataDir, type CleanupContext } from '../harness/pixiu-server.js';
import { waitUntil } from '../harness/checks.js';
import { RedisServer } from '../harness/redis-server.js';

const API_TOKEN = 'redis-cluster-test-api-token-0123456789';
let redis: RedisServer;
const files = cleanupList();

before(async () => {
  redis = await RedisServer.start({ args: ['--cluster-enabled', 'yes'] });
  files.after(() => redis.destroy());
});

after(() => files.run());

/** Runs `pixiu serve` on the cluster node and checks it was refused as unsupported. */
async function assertRefused(t: CleanupContext, what: string): Promise<void> {
  const run = await runCli(['serve'], {
    PIXIU_REDIS_URL: redis.url, PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_PORT: '0', PIXIU_API_TOKEN: API_TOKEN,
  });
  assert.equal(run.code, 1, `${what}: ${run.stderr}`);
  const expected = `pixiu: Redis at ${redis.url}: this Redis runs in cluster mode (redis_mode:cluster), which Pixiu does not support: `;
  assert.ok(run.stderr.includes(expected), `${what}:\n${run.stderr}`);
  assert.match(run.stderr, /point PIXIU_REDIS_URL at a standalone Redis/, what);
  assert.doesNotMatch(run.stderr, /retry later/, what);
  assert.doesNotMatch(run.stdout, /pixiu listening/, what);
}

test('a Redis in cluster mode is refused at start, with or without slots, naming the URL; never "retry later"', { timeout: 60_000 }, async (t) => {
  await assertRefused(t, 'no slots served');
  const admin = new Redis(redis.url);
  try {
    await admin.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
    await waitUntil('the one-node cluster to serve every slot', async () => /cluster_state:ok/.test(String(await admin.call('CLUSTER', 'INFO'))));
  } finally {
    admin.disconnect();
  }
  await assertRefused(t, 'every slot served');
});
