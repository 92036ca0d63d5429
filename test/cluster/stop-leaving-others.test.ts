/**
 * A node stopped while other nodes run on its Redis warns that it leaves them waiting
 * on its store (src/cluster/leaving-others.ts; the clusterchaos tester's F1: a node
 * stopped for good to scale in stalled every user's delivery on the other nodes, and
 * logged only `shutting down` / `pixiu stopped`). Node B is a real `pixiu serve`
 * stopped by SIGTERM beside node A (in this process, its log captured); A, alone once
 * B has gone, stops without the warning.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { LEAVING_OTHERS_MSG } from '../../src/cluster/leaving-others.js';
import { capturingLogger, logLines, type LogLine } from '../harness/log-capture.js';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList, spawnServe, startInProcess, tempDataDir } from '../harness/pixiu-server.js';

const API_TOKEN = 'leaving-others-api-token-0123456789';
const JWT_SECRET = 'leaving-others-jwt-secret-0123456789abcdef';

test('a node stopped by SIGTERM beside another warns that delivery of what it stored stalls until it runs again; the last node does not', { timeout: 90_000 }, async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const redis = await RedisServer.start();
  steps.after(() => redis.destroy());
  const prefix = 'leaving:';
  const { logger, lines } = capturingLogger();
  const a = await startInProcess(steps, { redisUrl: redis.url, redisPrefix: prefix, apiToken: API_TOKEN, jwtSecret: JWT_SECRET }, logger);

  const dirB = await tempDataDir(steps);
  const b = await spawnServe({
    PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: prefix, PIXIU_DATA_DIR: dirB, PIXIU_PORT: '0',
    PIXIU_API_TOKEN: API_TOKEN, PIXIU_JWT_SECRET: JWT_SECRET, PIXIU_LOG_LEVEL: 'info',
  }, steps);
  // A's node id, as B saw it at its start.
  const [atStart] = logLines(b.stdout(), 'other nodes in the cluster at start');
  const nodeA = (atStart?.nodes as { node: string }[] | undefined)?.map((n) => n.node);
  assert.equal(nodeA?.length, 1, b.stdout());

  assert.deepEqual(await b.term(), { code: 0, signal: null }, b.stderr());
  const out = b.stdout();
  // Parsed, not found by logLines: its text matches the raw line, where the message's quotes are escaped.
  const [warned, ...more] = out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as LogLine)
    .filter((l) => l.msg === LEAVING_OTHERS_MSG);
  assert.ok(warned !== undefined, out);
  assert.equal(more.length, 0, 'one line');
  const { storeId } = JSON.parse(await readFile(path.join(dirB, 'xiu', 'LAYOUT'), 'utf8')) as { storeId: string };
  const [claimed] = logLines(out, 'store partitions claimed');
  assert.deepEqual({ level: warned.level, nodes: warned.nodes, store: warned.store, dataDir: warned.dataDir, partitions: warned.partitions },
    { level: 40, nodes: nodeA, store: storeId, dataDir: dirB, partitions: claimed?.partitions });
  assert.match(LEAVING_OTHERS_MSG, /until a node runs on this data dir again.*README, "Several nodes"/);
  // Only what has not expired stalls (an entry records its message's expiry, append-13.lua), and entries of older releases.
  assert.match(LEAVING_OTHERS_MSG, /with a message stored here neither delivered nor expired \(or whose inbox entry, appended by an older release, records no expiry\) stalls/);
  // Between the stop's first line and its last.
  const order = ['shutting down', LEAVING_OTHERS_MSG, 'pixiu stopped'].map((msg) => out.indexOf(`"msg":${JSON.stringify(msg)}`));
  assert.ok(order[0]! >= 0 && order[0]! < order[1]! && order[1]! < order[2]!, JSON.stringify(order));

  // A is the only node now (B deregistered at its stop): no warning.
  await a.service.close();
  assert.ok(lines.some((l) => l.msg === 'pixiu stopped'));
  assert.deepEqual(lines.filter((l) => l.msg === LEAVING_OTHERS_MSG), []);
});
