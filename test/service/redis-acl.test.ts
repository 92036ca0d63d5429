/**
 * A Redis ACL user that may not run a command a node needs (walk24 M2): the start
 * fails naming the command and what to grant, not "Redis is unavailable, retry later"
 * (src/redis/command-refusal.ts); and the ACL README "Running with your own Redis"
 * documents starts. A real redis-server with ACL users; the claims' settle wait on
 * (its default), so that the start reads Redis's uptime (INFO) as a first start after
 * a Redis restart does.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import type { ConfigOverrides } from '../../src/config/config.js';
import { createRedis } from '../../src/redis/client.js';
import { capturingLogger } from '../harness/log-capture.js';
import { cleanupList, runCli, startInProcess, tempDataDir, type CleanupContext } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { startRefusal } from '../harness/start-refusal.js';

let server: RedisServer;
let admin: Redis;
const files = cleanupList();

before(async () => {
  server = await RedisServer.start({ aof: true });
  files.after(() => server.destroy());
  admin = await createRedis({ url: server.url, commandTimeoutMs: 5000 });
  files.after(() => admin.quit());
});

after(() => files.run());

/** Makes ACL user `user` with `rules` (deleted after the test) and answers its URL. */
async function aclUser(t: CleanupContext, user: string, rules: string[]): Promise<string> {
  await admin.call('ACL', 'SETUSER', user, 'reset', 'on', `>${user}-password`, ...rules);
  t.after(() => admin.call('ACL', 'DELUSER', user));
  return server.url.replace('redis://', `redis://${user}:${user}-password@`);
}

/**
 * The settings of a node on `url` under `prefix`; the claims' settle wait is its default
 * (on: `claimsSettleMs` undefined) unless `settle` is given.
 */
function settingsOn(url: string, prefix: string, settle?: string): ConfigOverrides & { redisUrl: string } {
  return { redisUrl: url, redisPrefix: prefix, storeDurability: 'relaxed', claimsSettleMs: settle };
}

/** Starts a service as ACL user `user` with `rules`; answers the service's error, or undefined once it started (and closed). */
async function startAs(t: CleanupContext, user: string, rules: string[], prefix: string): Promise<Error | undefined> {
  return startRefusal(t, settingsOn(await aclUser(t, user, rules), prefix), capturingLogger().logger);
}

/** The start's error for a user without INFO (command-refusal.ts), naming the Redis (version-check.ts). */
const NO_INFO = /^cannot use Redis at redis:\/\/[a-z]+:\*\*\*@127\.0\.0\.1:\d+: Redis refuses the command INFO to the ACL user of PIXIU_REDIS_URL \(NOPERM\): grant it \(ACL SETUSER <user> \+info\), or give the user the ACL the README lists \(for serve: "Running with your own Redis"; for inspect cluster: "Commands"\); retrying will not help$/;

test('a start as a user not allowed INFO fails naming INFO and the rule to grant, not "retry later"', async (t) => {
  const err = await startAs(t, 'noinfo', ['~*', '&*', '+@all', '-@dangerous'], 'acl-noinfo:');
  assert.ok(err !== undefined, 'started');
  assert.equal(err.name, 'StartupError');
  assert.match(err.message, NO_INFO);
});

test('pixiu serve as a user not allowed INFO prints the Redis client\'s ready-check notice once, then the refusal', { timeout: 60_000 }, async (t) => {
  // ioredis prints "Skipping the ready check" once per connection it readies; the start
  // made its second connection (the renewals') before the version check, and the notice
  // came twice before the refusal (redis-start.ts: the check now runs on the first one).
  const run = await runCli(['serve'], {
    PIXIU_REDIS_URL: await aclUser(t, 'noinfocli', ['~*', '&*', '+@all', '-@dangerous', '+config|get']), PIXIU_REDIS_PREFIX: 'acl-noinfo-cli:',
    PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_PORT: '0', PIXIU_API_TOKEN: 'redis-acl-test-api-token-0123456789',
  });
  assert.equal(run.code, 1, run.stderr);
  assert.equal(run.stderr.match(/Skipping the ready check because INFO command fails/g)?.length, 1, run.stderr);
  assert.match(run.stderr, /^pixiu: cannot use Redis at .*Redis refuses the command INFO to the ACL user of PIXIU_REDIS_URL \(NOPERM\)/m);
});

test('a node not allowed INFO is refused alike while another node runs (not only the first node of a cluster)', async (t) => {
  // The first node reads Redis's uptime (block-claim.ts); a second one did not, and
  // started on a refused INFO the first was refused for (redisrest F3).
  await startInProcess(t, settingsOn(await aclUser(t, 'full', ['~*', '&*', '+@all', '-@dangerous', '+info', '+config|get']), 'acl-second:', '0'), capturingLogger().logger)
    .catch((err: unknown) => assert.fail(`the first node did not start: ${String(err)}`));
  const second = await startAs(t, 'second', ['~*', '&*', '+@all', '-@dangerous', '+config|get'], 'acl-second:');
  assert.ok(second !== undefined, 'the second node started');
  assert.equal(second.name, 'StartupError');
  assert.match(second.message, NO_INFO);
});

test('the ACL README "Running with your own Redis" documents starts the service', async (t) => {
  // README: ACL SETUSER pixiu on >password ~* &* +@all -@dangerous +info +config|get
  assert.equal(await startAs(t, 'documented', ['~*', '&*', '+@all', '-@dangerous', '+info', '+config|get'], 'acl-documented:'), undefined);
});

test('a start on a Redis with INFO renamed away fails naming INFO as unknown to it, not "retry later"', async (t) => {
  const renamed = await RedisServer.start({ aof: true, args: ['--rename-command', 'INFO', ''] });
  t.after(() => renamed.destroy());
  const err = await startRefusal(t, settingsOn(renamed.url, 'renamed:'), capturingLogger().logger);
  assert.ok(err !== undefined, 'started');
  assert.equal(err.name, 'StartupError');
  assert.match(err.message, /^cannot use Redis at redis:\/\/127\.0\.0\.1:\d+: Redis does not know the command INFO \(renamed or disabled, as managed Redis services do\?\): Pixiu needs it/);
});
