/**
 * `pixiu inspect cluster` (src/cli/inspect-cluster.ts; an on-call SRE's finding: no
 * command listed the cluster): against two real nodes on one Redis it prints both (id,
 * URL, last renewal), each store with the node holding its lease, and the partitions'
 * claims; once a node stops, its store has no holder and its partitions are named
 * `without_holder`. It runs as a Redis user allowed reads (the ACL README "Commands"
 * gives, `-@all +@read` and TIME and INFO, no less: `+@read` alone is refused, naming
 * the command, walk24 M3):
 * any write, a script load included, would be refused and the command fail. A wrong
 * key prefix and a Redis that is down exit 1 with one line on stderr, nothing on stdout
 * and no stack trace, as the other inspect commands do (README "Commands"). Each node
 * shows the build it runs (`version`, `commit`: an upgrade tester's finding, nothing
 * said which release each node of a cluster ran), null for a node of a release whose
 * node-settings entry names none. The inbox generation shows whether it is set, its
 * value and age: nothing showed it after `pixiu redis lost-writes` (redisops2 R2).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Keys } from '../../src/redis/keys.js';
import type { ClusterView } from '../../src/cluster/cluster-view.js';
import { openInbox } from '../harness/checks.js';
import { RedisServer } from '../harness/redis-server.js';
import { REPO_ROOT, runCli, startInProcess, tempDataDir } from '../harness/pixiu-server.js';
import { JWT_SECRET } from '../gateway/gateway-fixture.js';
import { buildInfo } from '../../src/version.js';
import { raiseGeneration } from '../../src/inbox/generation.js';

const PREFIX = 'ops:';

/** The store id of a data dir (its `xiu/LAYOUT`). */
async function storeIdOf(dataDir: string): Promise<string> {
  return (JSON.parse(await readFile(path.join(dataDir, 'xiu', 'LAYOUT'), 'utf8')) as { storeId: string }).storeId;
}

/** The rules of README's `ACL SETUSER inspector on >password …` line (Commands, inspect cluster), after the password. */
async function readmeInspectorRules(): Promise<string[]> {
  const readme = (await readFile(path.join(REPO_ROOT, 'README.md'), 'utf8')).replace(/\s+/g, ' ');
  const line = /`ACL SETUSER inspector on >password ([^`]+)`/.exec(readme)?.[1];
  assert.ok(line !== undefined, 'README gives the inspector ACL');
  return line.split(' ');
}

test('inspect cluster prints both nodes with their URLs, each store with the node holding its lease and the partitions; read-only; a stopped node\'s store has no holder; a wrong prefix and Redis down exit 1 in one line', { timeout: 90_000 }, async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const settings = { redisUrl: redis.url, redisPrefix: PREFIX, jwtSecret: JWT_SECRET, storeDurability: 'relaxed' };
  const [dirA, dirB] = [await tempDataDir(t), await tempDataDir(t)];
  const a = await startInProcess(t, { ...settings, dataDir: dirA });
  const b = await startInProcess(t, { ...settings, dataDir: dirB });
  const [storeA, storeB] = [await storeIdOf(dirA), await storeIdOf(dirB)];

  // A Redis user that may read and nothing else: the ACL README "Commands" gives, read from it.
  const { redis: raw } = await openInbox(t, redis.url, PREFIX);
  const rules = await readmeInspectorRules();
  await raw.call('ACL', 'SETUSER', 'inspector', 'on', '>inspect-pw', ...rules);
  assert.notEqual(await raw.call('ACL', 'DRYRUN', 'inspector', 'set', 'k', 'v'), 'OK', 'the user may not write');
  assert.notEqual(await raw.call('ACL', 'DRYRUN', 'inspector', 'script', 'load', 'return 1'), 'OK', 'nor load a script');
  const env = { PIXIU_REDIS_URL: `redis://inspector:inspect-pw@127.0.0.1:${redis.port}`, PIXIU_REDIS_PREFIX: PREFIX };
  const inspect = async (): Promise<ClusterView> => {
    const run = await runCli(['inspect', 'cluster'], env);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stderr, '');
    return JSON.parse(run.stdout) as ClusterView;
  };

  const both = await inspect();
  // And no less would do (redisrest F4: it granted CLIENT SETNAME and PING, which
  // ioredis tolerates refused, and nothing sends): without any one of its grants the
  // command fails naming what was refused (its own command for a `+command` rule) —
  // but INFO, which on a primary with nodes only ioredis's ready check sends: there it
  // prints, and its line must name INFO refused, not any stderr (review36-redis L4).
  for (const rule of rules.filter((r) => r.startsWith('+'))) {
    const user = `less-${rule.replace(/\W/g, '')}`;
    await raw.call('ACL', 'SETUSER', user, 'on', '>less-pw', ...rules.filter((r) => r !== rule));
    const less = await runCli(['inspect', 'cluster'], { ...env, PIXIU_REDIS_URL: `redis://${user}:less-pw@127.0.0.1:${redis.port}` });
    const command = rule.startsWith('+@') ? '[A-Z]+' : rule.slice(1).toUpperCase();
    if (rule === '+info') {
      assert.match(less.stderr, /^Skipping the ready check because INFO command fails: "NOPERM /m, `${rule} is not needed: ${less.stdout}`);
    } else {
      assert.equal(less.code, 1, `${rule} is not needed: ${less.stdout}`);
      assert.match(less.stderr, new RegExp(`^pixiu: Redis refuses the command ${command} to the ACL user of PIXIU_REDIS_URL \\(NOPERM\\)`), rule);
    }
  }
  // `+@read` alone is not enough (walk24 M3): the refusal names the command and the rule, not "retry later".
  await raw.call('ACL', 'SETUSER', 'reader', 'on', '>reader-pw', '~*', '-@all', '+@read');
  const reader = await runCli(['inspect', 'cluster'], { ...env, PIXIU_REDIS_URL: `redis://reader:reader-pw@127.0.0.1:${redis.port}` });
  assert.equal(reader.code, 1, reader.stdout);
  assert.equal(reader.stdout, '');
  assert.match(reader.stderr, /^pixiu: (.*: )?Redis refuses the command (TIME|CLIENT SETNAME|INFO) to the ACL user of PIXIU_REDIS_URL \(NOPERM\): grant it \(ACL SETUSER <user> \+(time|client\|setname|info)\)/m);
  assert.ok(Math.abs(both.redis_time - Date.now()) < 60_000, `redis_time ${both.redis_time} is ms since the epoch`);
  assert.equal(both.prefix, PREFIX);
  assert.deepEqual(both.nodes.map((n) => [n.url, n.store]).sort(), [[a.service.url, storeA], [b.service.url, storeB]].sort());
  for (const n of both.nodes) {
    assert.match(n.node, /^[A-Za-z0-9._-]+$/);
    assert.equal(n.pid, process.pid, 'both run in this process');
    assert.deepEqual([n.version, n.commit], [buildInfo().version, buildInfo().commit], 'the build each runs');
    assert.ok(n.renewed_ms_ago >= 0 && n.renewed_ms_ago <= 15_000, JSON.stringify(n));
    assert.ok(n.expires_in_ms > 0 && n.expires_in_ms <= 15_000, JSON.stringify(n));
  }
  assert.deepEqual(both.lapsed_nodes, []);
  const nodeAt = (url: string): string | undefined => both.nodes.find((n) => n.url === url)?.node;
  // A's data dir started first: the lowest block.
  assert.deepEqual(both.stores.map((s) => ({ ...s, holder: s.holder && { ...s.holder, lease_expires_in_ms: s.holder.lease_expires_in_ms > 0 } })), [
    { store: storeA, dir: path.join(dirA, 'xiu'), host: both.stores[0]?.host, partitions: 8, blocks: ['0..7'], holder: { node: nodeAt(a.service.url), url: a.service.url, registered: true, lease_expires_in_ms: true } },
    { store: storeB, dir: path.join(dirB, 'xiu'), host: both.stores[1]?.host, partitions: 8, blocks: ['8..15'], holder: { node: nodeAt(b.service.url), url: b.service.url, registered: true, lease_expires_in_ms: true } },
  ]);
  assert.equal(typeof both.stores[0]?.host, 'string');
  assert.deepEqual(both.partitions, { total: 256, claimed: 16, free: 240, retired: [], without_holder: [] });
  assert.deepEqual(both.inbox_generation, { set: false, value: 0, raised_ms_ago: null }, 'never raised');

  // A node of an older release: registered, its entry as 2e0830c writes it (settings, store, secrets; no build).
  const keys = new Keys(PREFIX);
  const oldNode = 'old-host-4242-abcdef';
  await raw.zadd(keys.nodes(), String(both.redis_time + 60_000), oldNode);
  await raw.hset(keys.nodeSettings(), oldNode, JSON.stringify({
    inboxCap: 1000, store: 'store-of-an-old-node', secrets: { apiToken: '0123456789abcdef', jwtKind: 'secret', jwtKey: 'fedcba9876543210' },
  }));
  const mixed = await inspect();
  const old = mixed.nodes.find((n) => n.node === oldNode);
  assert.deepEqual([old?.version, old?.commit, old?.url], [null, null, null], JSON.stringify(old));
  assert.deepEqual(mixed.nodes.filter((n) => n.node !== oldNode).map((n) => n.commit), [buildInfo().commit, buildInfo().commit]);
  await raw.zrem(keys.nodes(), oldNode);

  // An operator ran `pixiu redis lost-writes` (a redisops2 finding: nothing showed the generation).
  const { after: generation } = await raiseGeneration(raw, keys);
  const raised = await inspect();
  assert.equal(raised.inbox_generation.set, true);
  assert.equal(raised.inbox_generation.value, generation);
  assert.ok(raised.inbox_generation.raised_ms_ago !== null && raised.inbox_generation.raised_ms_ago < 30_000, JSON.stringify(raised.inbox_generation));

  // B stops (its lease released, its registration removed); an operator retired partition 16.
  await b.service.close();
  await raw.hset(keys.storePartitions(), '16', 'retired');
  const one = await inspect();
  assert.deepEqual(one.nodes.map((n) => n.url), [a.service.url]);
  assert.deepEqual(one.stores.map((s) => [s.store, s.holder?.url ?? null]), [[storeA, a.service.url], [storeB, null]]);
  assert.deepEqual(one.partitions, { total: 256, claimed: 17, free: 239, retired: ['16'], without_holder: ['8..15'] });

  const unused = await runCli(['inspect', 'cluster'], { ...env, PIXIU_REDIS_PREFIX: 'nobody:' });
  assert.equal(unused.code, 1, unused.stdout);
  assert.equal(unused.stdout, '');
  assert.match(unused.stderr, /^pixiu: no Pixiu service has used the key prefix "nobody:" on this Redis .*\n$/);
  // Without +info the replica check cannot be made: said so, not the prefix line, which
  // on a replica not synced sent the operator the wrong way (walk29 F7).
  const noInfo = await runCli(['inspect', 'cluster'], { ...env, PIXIU_REDIS_PREFIX: 'nobody:', PIXIU_REDIS_URL: `redis://less-info:less-pw@127.0.0.1:${redis.port}` });
  assert.equal(noInfo.code, 1, noInfo.stdout);
  assert.match(noInfo.stderr, /(^|\n)pixiu: no Pixiu cluster secret under the key prefix "nobody:", and whether this Redis is a replica not synced yet cannot be told: Redis refuses the command INFO to the ACL user of PIXIU_REDIS_URL \(NOPERM\)/);

  await a.service.close();
  await redis.stop();
  const down = await runCli(['inspect', 'cluster'], { ...env, PIXIU_REDIS_COMMAND_TIMEOUT: '500' });
  assert.equal(down.code, 1, down.stdout);
  assert.equal(down.stdout, '');
  assert.match(down.stderr, /^pixiu: cannot reach Redis at redis:\/\/inspector:\S*@127\.0\.0\.1:\d+: .*\n$/);
  assert.doesNotMatch(down.stderr, /inspect-pw|\n\s+at /, 'neither the password nor a stack trace');
});

test('inspect cluster --help says what it prints, that it writes nothing, and its exit status; inspect --help lists it', async () => {
  const help = await runCli(['inspect', 'cluster', '--help']);
  assert.equal(help.code, 0, help.stderr);
  assert.match(help.stdout, /read-only: it reads the node registry and settings, the store claims and leases, the inbox generation, and writes nothing/);
  assert.match(help.stdout, /without_holder/);
  // dir is the store folder, not the data dir an operator set (a walk4 nit).
  assert.match(help.stdout, /stores +each data dir's store: store, dir \(its store folder, the data dir's xiu, absolute, as it\s+last started\)/);
  assert.match(help.stdout, /inbox_generation +set \(false: never raised\)/);
  assert.match(help.stdout, /Exit status: 0 when the cluster is printed/);
  const parent = await runCli(['inspect', '--help']);
  assert.match(parent.stdout, /cluster \[options\] +list the live nodes/);
});
