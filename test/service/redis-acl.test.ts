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
import { loadConfig } from '../../src/config/config.js';
import { createRedis } from '../../src/redis/client.js';
import { startService } from '../../src/service/service.js';
import { capturingLogger } from '../harness/log-capture.js';
import { cleanupList, tempDataDir } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

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

/** Starts a service as ACL user `user` with `rules`; answers the service's error, or undefined once it started (and closed). */
async function startAs(t: { after: (fn: () => unknown) => void }, user: string, rules: string[], prefix: string): Promise<Error | undefined> {
  await admin.call('ACL', 'SETUSER', user, 'reset', 'on', `>${user}-password`, ...rules);
  t.after(() => admin.call('ACL', 'DELUSER', user));
  const url = server.url.replace('redis://', `redis://${user}:${user}-password@`);
  const config = loadConfig({}, { port: '0', dataDir: await tempDataDir(t), redisUrl: url, redisPrefix: prefix, storeDurability: 'relaxed' });
  const started = await startService(config, capturingLogger().logger).then((service) => service, (err: unknown) => err as Error);
  if (started instanceof Error) return started;
  await started.close();
  return undefined;
}

test('a start as a user not allowed INFO fails naming INFO and the rule to grant, not "retry later"', async (t) => {
  const err = await startAs(t, 'noinfo', ['~*', '&*', '+@all', '-@dangerous'], 'acl-noinfo:');
  assert.ok(err !== undefined, 'started');
  assert.equal(err.name, 'StartupError');
  assert.match(err.message, /^Redis refuses the command INFO to the ACL user of PIXIU_REDIS_URL \(NOPERM\): grant it \(ACL SETUSER <user> \+info\), or give the user the ACL the README lists \(for serve: "Running with your own Redis"; for inspect cluster: "Commands"\); retrying will not help$/);
});

test('the ACL README "Running with your own Redis" documents starts the service', async (t) => {
  // README: ACL SETUSER pixiu on >password ~* &* +@all -@dangerous +info +config|get
  assert.equal(await startAs(t, 'documented', ['~*', '&*', '+@all', '-@dangerous', '+info', '+config|get'], 'acl-documented:'), undefined);
});

test('a start on a Redis with INFO renamed away fails naming INFO as unknown to it, not "retry later"', async (t) => {
  const renamed = await RedisServer.start({ aof: true, args: ['--rename-command', 'INFO', ''] });
  t.after(() => renamed.destroy());
  const config = loadConfig({}, { port: '0', dataDir: await tempDataDir(t), redisUrl: renamed.url, redisPrefix: 'renamed:', storeDurability: 'relaxed' });
  const err = await startService(config, capturingLogger().logger).then(async (service) => { await service.close(); return undefined; }, (e: unknown) => e as Error);
  assert.ok(err !== undefined, 'started');
  assert.equal(err.name, 'StartupError');
  assert.match(err.message, /^cannot use Redis at redis:\/\/127\.0\.0\.1:\d+: Redis does not know the command INFO \(renamed or disabled, as managed Redis services do\?\): Pixiu needs it/);
});
