/**
 * `pixiu redis lost-writes` (src/cli/redis.ts): raises the inbox generation on the
 * Redis the nodes use, says from what to what, and exits 0; refuses (exit 1, one line
 * on stderr, nothing written) a replica, a key prefix no service used, a Redis that does
 * not answer. The end-to-end effect on devices: test/gateway/lost-writes.test.ts.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { RedisServer, freePort } from '../harness/redis-server.js';
import { runCli } from '../harness/pixiu-server.js';
import { createRedis } from '../../src/redis/client.js';
import { Keys } from '../../src/redis/keys.js';

let primary: RedisServer;
let replica: RedisServer;
let redis: Redis;
const keys = new Keys('rlw:');

before(async () => {
  primary = await RedisServer.start();
  replica = await RedisServer.start({ args: ['--replicaof', '127.0.0.1', String(primary.port)] });
  redis = await createRedis({ url: primary.url, commandTimeoutMs: 5000 });
  // What every service writes at start: the prefix is in use.
  await redis.set(keys.clusterSecret(), 'x');
});

after(async () => {
  await redis?.quit();
  await replica?.destroy();
  await primary?.destroy();
});

test('--help says when to run it, what it does and its exit status', async () => {
  const run = await runCli(['redis', 'lost-writes', '--help']);
  assert.equal(run.code, 0);
  for (const words of ['unplanned failover', 'FAILOVER', 'before the nodes are repointed', 'Exit status: 0']) assert.ok(run.stdout.includes(words), words);
});

test('raises the generation each time it runs and says from what to what', async () => {
  const first = await runCli(['redis', 'lost-writes'], { PIXIU_REDIS_URL: primary.url, PIXIU_REDIS_PREFIX: 'rlw:' });
  assert.equal(first.code, 0, first.stderr);
  const one = Number(await redis.get(keys.inboxGeneration()));
  assert.ok(one > 0);
  assert.ok(first.stdout.startsWith(`inbox generation raised from 0 to ${one} on `), first.stdout);
  const second = await runCli(['redis', 'lost-writes', '--redis-url', primary.url, '--redis-prefix', 'rlw:']);
  assert.equal(second.code, 0, second.stderr);
  const two = Number(await redis.get(keys.inboxGeneration()));
  assert.ok(two > one);
  assert.ok(second.stdout.startsWith(`inbox generation raised from ${one} to ${two} on `), second.stdout);
});

test('refuses a replica, a key prefix no service used and a Redis that does not answer: exit 1, one line, nothing written', async () => {
  const onReplica = await runCli(['redis', 'lost-writes'], { PIXIU_REDIS_URL: replica.url, PIXIU_REDIS_PREFIX: 'rlw:' });
  assert.equal(onReplica.code, 1);
  assert.match(onReplica.stderr, /^pixiu: this Redis is a replica \(role slave\): run pixiu redis lost-writes against the primary/);
  assert.equal(onReplica.stdout, '');

  const unused = await runCli(['redis', 'lost-writes'], { PIXIU_REDIS_URL: primary.url, PIXIU_REDIS_PREFIX: 'nobody:' });
  assert.equal(unused.code, 1);
  assert.match(unused.stderr, /no Pixiu service has used the key prefix "nobody:"/);
  assert.equal(await redis.exists(new Keys('nobody:').inboxGeneration()), 0);

  const down = await runCli(['redis', 'lost-writes'], { PIXIU_REDIS_URL: `redis://127.0.0.1:${await freePort()}`, PIXIU_REDIS_COMMAND_TIMEOUT: '500ms' });
  assert.equal(down.code, 1);
  assert.equal(down.stdout, '');
  assert.equal(down.stderr.trim().split('\n').length, 1, down.stderr);
});
