import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import path from 'node:path';
import readline from 'node:readline';
import { ClassicLevel } from 'classic-level';
import { HIGH_WATER_KEY } from '../../src/store/keys.js';
import { REPO_ROOT, nodeArgsFor, siblingModule } from '../harness/test-build.js';
import { counterOf, fakeClock, openStore, partitionOf, tempDir } from './fixtures/store-harness.js';
import { decoded, waitUntil } from '../harness/checks.js';
import { spawnTied } from '../harness/tied-spawn.js';
import { watchBatchWrites } from './fixtures/batch-writes.js';


test('after a reopen the counter continues past the last id of every kind', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(t, dir, { partitions: 1 });
  await store.put({ kind: 1, type: 't', data: 1, to: ['a'] });
  await store.put({ kind: 3, type: 't', data: 2 });
  const last = await store.put({ kind: 2, type: 't', data: 3, room: 'r' });
  await store.close();

  const reopened = await openStore(t, dir, { partitions: 1 });
  const next = await reopened.put({ kind: 1, type: 't', data: 4, to: ['a'] });
  assert.equal(counterOf(last.id), 3);
  assert.equal(counterOf(next.id), 4, 'continues from the highest counter, whatever its kind');
});

test('the counter survives even when every record was swept (high-water key)', async (t) => {
  const dir = await tempDir(t);
  const clock = fakeClock();
  const store = await openStore(t, dir, { partitions: 1, now: clock.now });
  const puts = await Promise.all(Array.from({ length: 5 }, (_, i) => store.put({ kind: 1, type: 't', data: i, to: ['a'], ttlMs: 1000 })));
  clock.ms += 2000;
  assert.equal(await store.sweepNow(), 5);
  await store.close();

  const reopened = await openStore(t, dir, { partitions: 1, now: clock.now });
  assert.deepEqual(await reopened.getMany(puts.map((p) => p.id)), [null, null, null, null, null]);
  const next = await reopened.put({ kind: 1, type: 't', data: 'after', to: ['a'] });
  assert.equal(counterOf(next.id), 6, 'no id is reused');
});

test('the counter recovers from the last record key when the high-water key is missing', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(t, dir, { partitions: 1 });
  for (let i = 0; i < 3; i++) await store.put({ kind: 4, type: 't', data: i, to: ['a'] });
  await store.close();
  const db = new ClassicLevel<Buffer, Buffer>(path.join(dir, '0'), { keyEncoding: 'buffer', valueEncoding: 'buffer' });
  await db.open();
  await db.del(HIGH_WATER_KEY);
  await db.close();

  const reopened = await openStore(t, dir, { partitions: 1 });
  const next = await reopened.put({ kind: 1, type: 't', data: 'after', to: ['a'] });
  assert.equal(counterOf(next.id), 4);
});

test('a put resolves only once its record is in LevelDB (read back with the cache off)', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(t, dir, { partitions: 2, cacheBytes: 0 });
  const reads = await Promise.all(Array.from({ length: 300 }, (_, i) =>
    store.put({ kind: 1, type: 't', data: i, to: [`u${i}`] }).then((r) => store.get(r.id))));
  assert.deepEqual(reads.map((r) => decoded(r)?.data), reads.map((_, i) => i));
});

test('every put acknowledged before a SIGKILL is readable after reopen', async (t) => {
  const dir = await tempDir(t);
  const child = spawnTied(process.execPath, [...nodeArgsFor(siblingModule(import.meta.url, './fixtures/crash-writer')), dir], {
    cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => child.kill('SIGKILL'));
  assert.ok(child.stdout !== null && child.stderr !== null);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = once(child, 'exit');
  const ids: string[] = [];
  const lines = readline.createInterface({ input: child.stdout });
  let killed = false;
  lines.on('line', (line) => {
    // A line cut by the kill is not a full id; readline may hand it over at the end.
    if (/^[0-9a-f]{16}$/.test(line)) ids.push(line);
    if (ids.length >= 400 && !killed) {
      killed = true;
      child.kill('SIGKILL');
    }
  });
  const [code, signal] = await exited;
  assert.equal(signal, 'SIGKILL', `the writer was killed mid-stream (exit ${String(code)}, stderr: ${stderr})`);
  assert.ok(ids.length >= 400);

  const store = await openStore(t, dir, { partitions: 4, cacheBytes: 0 });
  const read = await store.getMany(ids);
  const lost = ids.filter((_, i) => read[i] === null);
  assert.deepEqual(lost, [], 'no acknowledged put is lost');
  assert.ok(read.every((r) => decoded(r)?.type === 'crash'));
  // And the counter moved on past every acknowledged id.
  const next = await store.put({ kind: 1, type: 'after', data: 0, to: ['user-0'] });
  const before = ids.filter((id) => partitionOf(id) === partitionOf(next.id)).map(counterOf);
  assert.ok(counterOf(next.id) > Math.max(0, ...before));
});

test('counters answer the last counter written per partition: after puts, and after advanceCounters moves them forward only', async (t) => {
  const store = await openStore(t, await tempDir(t), { partitions: 1 });
  assert.deepEqual(store.counters, [0]);
  for (let i = 0; i < 3; i++) await store.put({ kind: 1, type: 't', data: i, to: ['a'] });
  assert.deepEqual(store.counters, [3]);
  await store.advanceCounters([100]);
  assert.deepEqual(store.counters, [100]);
  await store.advanceCounters([50]);
  await store.advanceCounters([undefined]);
  assert.deepEqual(store.counters, [100], 'never moved back');
  const next = await store.put({ kind: 1, type: 't', data: 'next', to: ['a'] });
  assert.equal(counterOf(next.id), 101);
  assert.deepEqual(store.counters, [101]);
});

test('durability fsync writes every batch with sync: true, and a put resolves only once its batch is written (DESIGN.md §3, §11)', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(t, dir, { sync: true });
  const writes = watchBatchWrites(t);
  writes.hold(true);
  let resolved = false;
  const put = store.put({ kind: 1, type: 't', data: 1, to: ['a'], clientMsgId: 'fsync-1' }).then((r) => {
    resolved = true;
    return r;
  });
  const more = Promise.all([store.put({ kind: 3, type: 't', data: 2 }), store.put({ kind: 2, type: 't', data: 3, room: 'r' })]);
  await waitUntil('the batch reaches LevelDB', async () => writes.syncs.length > 0);
  // A window for a resolve that must not come before the write (no event to wait on).
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(resolved, false, 'the put waits for its batch write');
  writes.hold(false);
  await put;
  await more;
  assert.ok(writes.syncs.length > 0 && writes.syncs.every(Boolean), `every batch written with sync: true (${writes.syncs.join(', ')})`);
});

test('durability relaxed writes batches without sync, as PIXIU_STORE_DURABILITY=relaxed says', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(t, dir, { sync: false });
  const writes = watchBatchWrites(t);
  await store.put({ kind: 1, type: 't', data: 1, to: ['a'], clientMsgId: 'relaxed-1' });
  assert.ok(writes.syncs.length > 0 && writes.syncs.every((s) => !s), `every batch written with sync: false (${writes.syncs.join(', ')})`);
});
