/**
 * A node restarted on its data dir after a `kill -9` does not take its dead
 * predecessor for another node (an ops tester's finding: for up to 15 s, until the
 * killed process's registration lapsed, the new node listed it in `other nodes in the
 * cluster at start`, `pixiu_cluster_nodes` read 2, `pixiu inspect cluster` listed it,
 * and a SIGTERM then warned `this node stops while other nodes run …` naming it — advice
 * for a cluster, given to a node alone). The start judged the predecessor's store lease
 * left behind by a dead process (store-ownership.ts `leftBehind`) and removes its
 * registration (node-registry.ts `start`). A genuine second node, on a data dir of its
 * own, is still counted and warned about.
 *
 * The killed node is a real `pixiu serve` (SIGKILL); its successor runs in this process
 * on the same data dir, its log captured. The killed node's registration is given 60 s
 * to live (15 s after its last renewal, as written) so that every check runs within it
 * on a slow machine.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import type { ClusterView } from '../../src/cluster/cluster-view.js';
import { LEAVING_OTHERS_MSG } from '../../src/cluster/leaving-others.js';
import { Keys } from '../../src/redis/keys.js';
import { metricSample, openInbox } from '../harness/checks.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { RedisServer } from '../harness/redis-server.js';
import {
  cleanupList, runCli, spawnServe, startInProcess, tempDataDir, type CleanupContext, type InProcessServer,
} from '../harness/pixiu-server.js';

const API_TOKEN = 'predecessor-api-token-0123456789ab';
const JWT_SECRET = 'predecessor-jwt-secret-0123456789abcdef';

/** A node of `prefix` SIGKILLed, then started again in this process on its data dir. */
interface Restarted {
  readonly node: InProcessServer;
  readonly lines: LogLine[];
  /** The killed process's node id. */
  readonly ghost: string;
}

async function killAndRestart(t: CleanupContext, redis: RedisServer, raw: Redis, prefix: string): Promise<Restarted> {
  const keys = new Keys(prefix);
  const before = new Set(await raw.zrange(keys.nodes(), '0', '-1'));
  const dataDir = await tempDataDir(t);
  const killed = await spawnServe({
    PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: prefix, PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0',
    PIXIU_API_TOKEN: API_TOKEN, PIXIU_JWT_SECRET: JWT_SECRET, PIXIU_LOG_LEVEL: 'info',
  }, t);
  assert.equal((await killed.kill()).signal, 'SIGKILL');
  const [ghost, ...more] = (await raw.zrange(keys.nodes(), '0', '-1')).filter((n) => !before.has(n));
  assert.ok(ghost !== undefined && more.length === 0, 'the killed node\'s registration lives on');
  const [secs] = await raw.time();
  await raw.zadd(keys.nodes(), String((Number(secs) + 60) * 1000), ghost);
  const { logger, lines } = capturingLogger();
  const node = await startInProcess(t, {
    redisUrl: redis.url, redisPrefix: prefix, dataDir, apiToken: API_TOKEN, jwtSecret: JWT_SECRET,
  }, logger);
  return { node, lines, ghost };
}

/** `pixiu inspect cluster`'s live nodes. */
async function inspectNodes(redis: RedisServer, prefix: string): Promise<string[]> {
  const run = await runCli(['inspect', 'cluster'], { PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: prefix });
  assert.equal(run.code, 0, run.stderr);
  return (JSON.parse(run.stdout) as ClusterView).nodes.map((n) => n.node).sort();
}

async function clusterNodes(node: InProcessServer): Promise<number | undefined> {
  return metricSample((await node.client.get('/metrics')).text, 'pixiu_cluster_nodes');
}

test('a node restarted on its data dir after a kill -9 does not count its dead predecessor as another node: no start listing, gauge, inspect entry or stop warning; a real second node still counts', { timeout: 120_000 }, async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const redis = await RedisServer.start();
  steps.after(() => redis.destroy());
  const { redis: raw } = await openInbox(steps, redis.url);

  // Alone: the predecessor is the only other registration there was.
  const alone = await killAndRestart(steps, redis, raw, 'alone:');
  const self = alone.node.service;
  assert.deepEqual(alone.lines.filter((l) => l.msg === 'other nodes in the cluster at start').map((l) => l.nodes), []);
  const [removed] = alone.lines.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('registration of the previous run on this data dir removed'));
  assert.equal(removed?.predecessor, alone.ghost, JSON.stringify(alone.lines.map((l) => l.msg)));
  assert.equal(await clusterNodes(alone.node), 1);
  const aloneNodes = await inspectNodes(redis, 'alone:');
  assert.equal(aloneNodes.length, 1);
  assert.ok(!aloneNodes.includes(alone.ghost), 'inspect does not list the predecessor');
  await self.close();
  assert.deepEqual(alone.lines.filter((l) => l.msg === LEAVING_OTHERS_MSG), [], 'no stop warning for a node alone');

  // Beside a node on a data dir of its own: that one is listed, counted and warned about; the predecessor is not.
  const other = await startInProcess(steps, { redisUrl: redis.url, redisPrefix: 'pair:', apiToken: API_TOKEN, jwtSecret: JWT_SECRET });
  const [otherNode] = await raw.zrange(new Keys('pair:').nodes(), '0', '-1');
  assert.ok(otherNode !== undefined);
  const pair = await killAndRestart(steps, redis, raw, 'pair:');
  const [atStart] = pair.lines.filter((l) => l.msg === 'other nodes in the cluster at start');
  assert.deepEqual((atStart?.nodes as { node: string }[] | undefined)?.map((n) => n.node), [otherNode]);
  assert.equal(await clusterNodes(pair.node), 2);
  const pairNodes = await inspectNodes(redis, 'pair:');
  assert.equal(pairNodes.length, 2);
  assert.ok(pairNodes.includes(otherNode) && !pairNodes.includes(pair.ghost), pairNodes.join());
  await pair.node.service.close();
  assert.deepEqual(pair.lines.filter((l) => l.msg === LEAVING_OTHERS_MSG).map((l) => l.nodes), [[otherNode]]);
  await other.service.close();
});
