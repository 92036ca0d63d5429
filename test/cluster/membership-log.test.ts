/**
 * Each node logs the cluster's membership as its node registry sees it
 * (src/cluster/membership-log.ts): `node joined the cluster` when another node
 * registers, with its store and advertised URL from its lease, and `node left the
 * cluster` when it is gone — each once. (An ops finding: no node logged another's
 * joining or leaving.) Two services in this process on one Redis; A's log is captured.
 * A node starting names those already there in one line. Registrations renew every 5 s, so each line comes within a renewal or two.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { RedisServer } from '../harness/redis-server.js';
import { startInProcess, tempDataDir } from '../harness/pixiu-server.js';
import { JWT_SECRET } from '../gateway/gateway-fixture.js';

test('a node logs another joining, with its store and URL, and leaving (stopped), once each', { timeout: 60_000 }, async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const settings = { redisUrl: redis.url, redisPrefix: 'members:', jwtSecret: JWT_SECRET, storeDurability: 'relaxed' };
  const { logger, lines } = capturingLogger();
  const a = await startInProcess(t, { ...settings, dataDir: await tempDataDir(t) }, logger);
  assert.deepEqual(lines.filter((l) => l.msg === 'other nodes in the cluster at start'), [], 'alone at its start: no such line');

  const dirB = await tempDataDir(t);
  const b = await startInProcess(t, { ...settings, dataDir: dirB });
  const { storeId } = JSON.parse(await readFile(path.join(dirB, 'xiu', 'LAYOUT'), 'utf8')) as { storeId: string };
  await waitUntil('A logs B joining', async () => lines.some((l) => l.msg === 'node joined the cluster'), 20_000);
  const joined = lines.find((l) => l.msg === 'node joined the cluster');
  assert.equal(joined?.level, 30, 'info');
  assert.equal(joined?.url, b.service.url, JSON.stringify(joined));
  assert.equal(joined?.store, storeId);
  assert.equal(typeof joined?.peer, 'string');

  await b.service.close();
  await waitUntil('A logs B leaving', async () => lines.some((l) => l.msg === 'node left the cluster'), 20_000);
  const left = lines.filter((l) => l.msg === 'node left the cluster');
  assert.deepEqual(left.map((l) => [l.level, l.peer, l.url, l.store]), [[30, joined?.peer, b.service.url, storeId]]);
  assert.match(String(left[0]?.reason), /^stopped/);
  assert.equal(lines.filter((l) => l.msg === 'node joined the cluster').length, 1, 'the join logged once, over several renewals');

  // A node starting beside A names it once, in one line, rather than as a join.
  const c = capturingLogger();
  await startInProcess(t, { ...settings, dataDir: await tempDataDir(t) }, c.logger);
  const atStart = c.lines.filter((l) => l.msg === 'other nodes in the cluster at start');
  assert.equal(atStart.length, 1, JSON.stringify(c.lines.filter((l) => l.level >= 30)));
  assert.deepEqual((atStart[0]?.nodes as { url?: string }[]).map((n) => n.url), [a.service.url]);
  assert.deepEqual(c.lines.filter((l) => l.msg === 'node joined the cluster'), []);
});
