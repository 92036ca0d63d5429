/**
 * `pixiu serve` stopped (SIGTERM) while its disk is stalled mid-write (DESIGN.md §6,
 * docs/decisions.md "A store's close that does not end in its time is given up"): the
 * store's close is given up after PIXIU_STORE_WRITE_TIMEOUT + 5 s with one error line
 * naming the partition still writing, every other step of the shutdown runs and
 * `pixiu stopped` is logged, all while the disk is still frozen; the process exits 74
 * (EXIT_UNFINISHED) — once the disk is back: a thread held by a frozen file system holds
 * the process's exit in the kernel. A start on the same data dir afterwards reads every
 * message answered 2xx before the freeze. Before, the shutdown waited on the store's
 * close for as long as the disk did (a store reviewer's F3). A real stalled disk: an
 * ext4 loop device, frozen (root only; test/harness/frozen-disk.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { EXIT_UNFINISHED } from '../../src/cli/serve.js';
import { STORE_CLOSE_MARGIN_MS, STORE_NOT_CLOSED } from '../../src/service/store-close.js';
import { expectError, waitUntil, within } from '../harness/checks.js';
import { freezableDiskOrSkip } from '../harness/frozen-disk.js';
import { logLines } from '../harness/log-capture.js';
import { PixiuClient, spawnServe, type ServeProcess } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

const WRITE_TIMEOUT_MS = 1_000;
/** The store step's bound (store-close.ts). */
const BOUND_MS = WRITE_TIMEOUT_MS + STORE_CLOSE_MARGIN_MS;

test('SIGTERM on a stalled disk: the store\'s close is given up after its bound with one error line, the rest of the shutdown runs, exit 74 once the disk is back; a restart reads every 2xx message', { timeout: 120_000 }, async (t) => {
  const disk = await freezableDiskOrSkip(t);
  if (disk === undefined) return;
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const env = {
    PIXIU_REDIS_URL: redis.url, PIXIU_DATA_DIR: path.join(disk.dir, 'data'), PIXIU_PORT: '0', PIXIU_LOG_LEVEL: 'info',
    PIXIU_API_TOKEN: 'stalled-shutdown-test-api-token-0123456789', PIXIU_STORE_WRITE_TIMEOUT: `${WRITE_TIMEOUT_MS}ms`,
    // The shutdown's time for Redis (3 × this + 1 s = 4 s) is shorter than the store's
    // bound: the steps on Redis after the store's still get theirs.
    PIXIU_REDIS_COMMAND_TIMEOUT: '1s',
  };
  // Stopped after the thaw, before the unmount, however the test ends.
  const serves: ServeProcess[] = [];
  disk.beforeUnmount(() => Promise.all(serves.map((s) => s.kill())));
  const serve = await spawnServe(env);
  serves.push(serve);
  const client = new PixiuClient(serve.url, env.PIXIU_API_TOKEN);

  // Answered 2xx before the freeze: every one must be read back after the restart.
  const acknowledged: { id: string; data: string }[] = [];
  await Promise.all(Array.from({ length: 24 }, async (_, i) => {
    const data = `before-${i}`;
    const answer = await client.post('/v1/messages', { to: `user-${i % 6}`, type: 't', data, client_msg_id: data });
    assert.equal(answer.status, 201, answer.text);
    acknowledged.push({ id: (answer.body as { id: string }).id, data });
  }));

  disk.freeze();
  // A write held by the frozen disk: its POST is answered 503 by the write-stall watchdog.
  const message = { to: 'alice', type: 't', data: 'stalled', client_msg_id: 'stalled-1' };
  const held = await within(5_000, 'a POST on the stalled disk', client.post('/v1/messages', message));
  expectError(held, 503, 'UNAVAILABLE', /has had a write in flight/);
  const partition = Number(/partition (\d+)/.exec(held.text)?.[1]);

  const termAt = performance.now();
  serve.proc.kill('SIGTERM');
  await waitUntil('the store-not-closed line', async () => logLines(serve.stdout(), STORE_NOT_CLOSED).length > 0, BOUND_MS + 10_000);
  const gaveUpAfter = performance.now() - termAt;
  await waitUntil('pixiu stopped', async () => logLines(serve.stdout(), 'pixiu stopped').length > 0, 10_000);
  const [notClosed, ...more] = logLines(serve.stdout(), STORE_NOT_CLOSED);
  assert.equal(more.length, 0, 'one line');
  assert.equal(notClosed?.level, 50);
  assert.equal(notClosed?.timeoutMs, BOUND_MS);
  // The close had its whole bound (a timer may fire a moment early), not more than a few seconds past it.
  assert.ok(gaveUpAfter >= BOUND_MS - 50 && gaveUpAfter < BOUND_MS + 8_000, `given up after ${Math.round(gaveUpAfter)} ms`);
  const writing = notClosed?.writing as { partition: number; folder: string; ms: number }[];
  assert.ok(writing.some((w) => w.partition === partition && w.ms >= BOUND_MS), JSON.stringify(writing));
  // Every step after the store's ran (the line comes after the last of them), still frozen.
  const stopped = logLines(serve.stdout(), 'pixiu stopped');
  assert.deepEqual(stopped.map((l) => [l.level, l.unfinished]), [[40, ['store']]]);
  // Redis answers: none of its steps was given up or left out (the store's counters are recorded).
  assert.deepEqual(serve.stdout().split('\n').filter((l) => l.includes('"msg":"shutdown step')), [], 'no step failed or given up');

  // The exit waits for the thread the disk holds (observed: until the thaw); then 74.
  disk.thaw();
  assert.deepEqual(await within(30_000, 'the exit after the thaw', serve.exited), { code: EXIT_UNFINISHED, signal: null }, serve.stderr());

  // The next start recovers the store's log and its lock: every message answered 2xx is there.
  const again = await spawnServe(env);
  serves.push(again);
  const after = new PixiuClient(again.url, env.PIXIU_API_TOKEN);
  for (const { id, data } of acknowledged) {
    const read = await after.get(`/v1/messages/${id}`);
    assert.equal(read.status, 200, `${id}: ${read.text}`);
    assert.equal((read.body as { data: unknown }).data, data);
  }
  // The message refused 503 is stored once by its retry (whether or not its stalled write landed).
  const retried = await after.post('/v1/messages', message);
  assert.ok(retried.status === 201 || retried.status === 200, retried.text);
  const history = await after.get('/v1/users/alice/messages');
  assert.deepEqual((history.body as { messages: { id: string }[] }).messages.map((m) => m.id), [(retried.body as { id: string }).id]);
  assert.deepEqual(await again.term(), { code: 0, signal: null }, again.stderr());
});
