/**
 * A delivery stall behind a stopped node, as an operator reads it in the log of the
 * node that waits (src/delivery/stall-log.ts, docs/api.md "Errors"): a warning naming
 * the user, the reason (the store whose lease has lapsed) and `failures`; and, once
 * that node is back and the message goes out, one info line `delivery resumed` with the
 * user, `stalledMs` and `failures`. (An ops finding: the stall's start was the only
 * line, and its end was not logged at all.) The pace of the repeated warnings is pinned
 * with a mock clock in test/unit/session-stall-log.test.ts.
 *
 * Two services in this process on one Redis: A stores the message (its partition block),
 * then stops; B, whose log is captured, has the user's device.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { RedisServer } from '../harness/redis-server.js';
import { startInProcess, tempDataDir } from '../harness/pixiu-server.js';
import { TestClient, testToken } from '../harness/ws-client.js';
import { expectFrame, postOne } from '../gateway/delivery-fixture.js';
import { JWT_KEY, JWT_SECRET } from '../gateway/gateway-fixture.js';

let redis: RedisServer;

before(async () => {
  redis = await RedisServer.start();
});

after(async () => {
  await redis?.destroy();
});

test('a user stalled behind a stopped node is logged with the reason, and its delivery resuming once the node is back is one info line', { timeout: 60_000 }, async (t) => {
  const settings = { redisUrl: redis.url, redisPrefix: 'stall-log:', partitions: '1', jwtSecret: JWT_SECRET, storeDurability: 'relaxed' };
  const dirA = await tempDataDir(t);
  const a = await startInProcess(t, { ...settings, dataDir: dirA });
  const posted = await postOne(a.client, 'u99');
  await a.service.close();

  const { logger, lines } = capturingLogger();
  const b = await startInProcess(t, { ...settings, dataDir: await tempDataDir(t) }, logger);
  const device = await TestClient.connect(b.service.url, { token: await testToken(JWT_KEY, 'u99'), params: { device: 'z' } });
  t.after(() => device.close());
  await waitUntil('the failed pull is logged', async () => lines.some((l) => l.msg === 'delivery fetch failed, will retry' && l.level === 40), 10_000);
  const warning = lines.find((l) => l.msg === 'delivery fetch failed, will retry' && l.level === 40);
  assert.equal(warning?.user, 'u99');
  assert.equal(warning?.failures, 1);
  assert.match(String(warning?.reason), /held by store \w+, whose lease has lapsed \(its node stopped/);

  await startInProcess(t, { ...settings, dataDir: dirA });
  assert.equal((await expectFrame(device, 'welcome', 15_000)).seq, posted.seq);
  assert.equal((await expectFrame(device, 'msg', 15_000)).id, posted.id);
  const resumed = lines.filter((l) => l.msg === 'delivery resumed');
  assert.equal(resumed.length, 1, JSON.stringify(lines.filter((l) => l.level >= 30)));
  const [line] = resumed;
  assert.equal(line?.level, 30, 'info');
  assert.equal(line?.user, 'u99');
  assert.ok(typeof line?.failures === 'number' && line.failures >= 1, JSON.stringify(line));
  assert.ok(typeof line?.stalledMs === 'number' && line.stalledMs > 0, JSON.stringify(line));
});
