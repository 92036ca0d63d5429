/**
 * What a start says before it serves (src/cli/serve.ts), against a private
 * redis-server and the real `pixiu serve`: its first line comes at once, before the
 * service's code is loaded and Redis reached — a node restarted onto a promoted
 * replica was silent for ~16 s before `store partitions claimed` on a loaded machine,
 * which an SRE took for an unexplained wait (a black-box SRE's finding) — and a wait
 * on a lease another host left on the data dir's store (a node that did not stop
 * cleanly) is logged when it begins, saying how long at most, before the claim.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PartitionClaims } from '../../src/cluster/partition-claims.js';
import { Keys } from '../../src/redis/keys.js';
import { openInbox } from '../harness/checks.js';
import type { LogLine } from '../harness/log-capture.js';
import { spawnServe, tempDataDir } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

/** The JSON lines of a process's stdout, in order. */
const jsonLines = (stdout: string): LogLine[] => stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as LogLine);

test('a start logs its first line at once, then the wait on a lease another host left, with its bound, before the claim', { timeout: 90_000 }, async (t) => {
  const server = await RedisServer.start();
  t.after(() => server.destroy());
  const { redis } = await openInbox(t, server.url);
  const prefix = 'start-log:';
  const env = { PIXIU_REDIS_URL: server.url, PIXIU_REDIS_PREFIX: prefix, PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_PORT: '0', PIXIU_LOG_LEVEL: 'info' };
  const first = await spawnServe(env, t);
  const storeId = jsonLines(first.stdout()).find((l) => l.msg === 'store partitions claimed')?.store;
  assert.equal(typeof storeId, 'string', first.stdout());
  assert.deepEqual(await first.term(), { code: 0, signal: null }, first.stderr());

  // A node of another host that did not stop cleanly: its lease lapses in 14 s, within the
  // start's 20 s wait (at 8 s, a start at load ~12 reached it after it had lapsed).
  await new PartitionClaims(redis, new Keys(prefix)).renewLease(String(storeId), { url: 'http://10.0.0.8:8080', node: 'node-gone-far', host: 'far-away', pid: 1, renewal: 1 }, 14_000);
  const second = await spawnServe(env, t);
  const lines = jsonLines(second.stdout());
  const at = (pattern: RegExp): number => lines.findIndex((l) => pattern.test(l.msg ?? ''));
  assert.match(lines[0]?.msg ?? '', /^pixiu starting: /, second.stdout());
  assert.equal(lines[0]?.redis, server.url);
  assert.equal(lines[0]?.level, 30);
  const waiting = at(/^store lease held by another node, .*: waiting up to 20 s/);
  const lapsed = at(/^store lease lapsed: its node is gone/);
  const claimed = at(/^store partitions claimed$/);
  assert.ok(waiting > 0 && lapsed > waiting && claimed > lapsed, second.stdout());
  assert.equal(lines[waiting]?.node, 'node-gone-far');
  assert.deepEqual(await second.term(), { code: 0, signal: null }, second.stderr());
});
