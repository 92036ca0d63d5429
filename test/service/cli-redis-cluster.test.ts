/**
 * The ops commands on a Redis in cluster mode are refused as `pixiu serve` refuses it
 * (src/redis/version-check.ts `refuseClusterMode`; test/service/redis-cluster.test.ts
 * for serve): `inspect inbox`, `inspect cluster` and `redis lost-writes` exit 1 with
 * serve's words and nothing on stdout; `inspect id` prints the decoded id alone with
 * the refusal as its note on stderr (exit 0, as for a Redis that does not answer).
 * Before, a one-node cluster serving no slots got "Redis Cluster is down; retry later"
 * (retrying never helps), and one serving every slot was read and written (lost-writes
 * raised the generation there), by chance. A real `redis-server --cluster-enabled yes`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import { waitUntil } from '../harness/checks.js';
import { runCli, runEach } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

const COMMANDS = [['inspect', 'inbox', 'u1'], ['inspect', 'cluster'], ['redis', 'lost-writes'], ['inspect', 'id', '0501000000000001']] as const;

/** Runs every ops command on `url` and checks each was refused in serve's words. */
async function assertRefused(url: string, what: string): Promise<void> {
  const words = `Redis at ${url}: this Redis runs in cluster mode (redis_mode:cluster), which Pixiu does not support: `;
  for (const [args, run] of await runEach(COMMANDS, (args) => runCli(args, { PIXIU_REDIS_URL: url }))) {
    const named = `${what}, ${args.join(' ')}:\n${run.stdout}\n${run.stderr}`;
    assert.doesNotMatch(run.stderr, /retry later/, named);
    assert.match(run.stderr, /point PIXIU_REDIS_URL at a standalone Redis/, named);
    if (args[1] === 'id') {
      assert.equal(run.code, 0, named);
      assert.ok(run.stderr.startsWith(`the partition's holder is not shown: ${words}`), named);
      assert.deepEqual(JSON.parse(run.stdout), { id: '0501000000000001', partition: 5, kind: 'user', counter: 1 }, named);
    } else {
      assert.equal(run.code, 1, named);
      assert.ok(run.stderr.startsWith(`pixiu: ${words}`), named);
      assert.equal(run.stdout, '', named);
    }
  }
}

test('inspect and redis lost-writes refuse a Redis in cluster mode in serve\'s words, with or without slots; lost-writes writes nothing', { timeout: 60_000 }, async (t) => {
  const redis = await RedisServer.start({ args: ['--cluster-enabled', 'yes'] });
  t.after(() => redis.destroy());
  await assertRefused(redis.url, 'no slots served');
  const admin = new Redis(redis.url);
  t.after(() => admin.disconnect());
  await admin.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
  await waitUntil('the one-node cluster to serve every slot', async () => /cluster_state:ok/.test(String(await admin.call('CLUSTER', 'INFO'))));
  // A prefix in use (every service writes its secret at start): the commands read and wrote here before.
  const keys = new Keys('px:');
  await admin.set(keys.clusterSecret(), 'x');
  await assertRefused(redis.url, 'every slot served');
  assert.equal(await admin.exists(keys.inboxGeneration()), 0, 'lost-writes raised the generation on a cluster node');
});
