/**
 * A write that fails part way (here: the disk is full) leaves LevelDB's log torn, and
 * LevelDB itself goes on appending to it: every record written after the tear, fsynced
 * and acknowledged, was dropped the next time the database opened (a fresh operator's
 * try: 238 acknowledged messages gone after one disk-full episode and a restart). The
 * store must take no write into a partition whose write failed until it has reopened
 * it (recovery ends the torn log and starts a new one). Real LevelDB on a real full
 * disk: a small tmpfs, so the test needs root with the right to mount one.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { unlinkSync } from 'node:fs';
import { mkdtemp, rm, statfs, truncate, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { isPixiuError, StartupError } from '../../src/errors.js';
import { MessageStore, type PutResult } from '../../src/store/message-store.js';
import { REOPEN_SPARE_BYTES, lackOfRoomToReopen } from '../../src/store/reopen-room.js';
import { openStore, storeOptions } from './fixtures/store-harness.js';
import { fill, smallDisk } from '../harness/small-disk.js';
import { waitUntil } from '../harness/checks.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';

const DATA = 'x'.repeat(2000);

/** A one-partition store on a 2 MiB tmpfs; undefined (the test skipped) when none can be mounted. */
async function storeOnSmallDisk(t: TestContext): Promise<{ disk: string; dir: string; store: MessageStore; lines: LogLine[] } | undefined> {
  const disk = await smallDisk(t, '2m');
  if (disk === undefined) {
    t.skip('no right to mount a tmpfs');
    return undefined;
  }
  const dir = path.join(disk, 'xiu');
  const { logger, lines } = capturingLogger();
  return { disk, dir, store: await openStore(t, dir, { partitions: 1, logger }), lines };
}

/** As {@link storeOnSmallDisk}, with a clock the test moves by hand (for sweeps). */
async function clockedStoreOnSmallDisk(t: TestContext): Promise<{ disk: string; clock: { ms: number }; store: MessageStore } | undefined> {
  const disk = await smallDisk(t, '2m');
  if (disk === undefined) {
    t.skip('no right to mount a tmpfs');
    return undefined;
  }
  const clock = { ms: 1_800_000_000_000 };
  return { disk, clock, store: await openStore(t, path.join(disk, 'xiu'), { partitions: 1, now: () => clock.ms }) };
}

/** The message of the last put {@link tryPut} saw refused. */
let lastRefusal: string | undefined;

/** Puts one message; answers its result, or undefined when the store refused it as UNAVAILABLE. */
async function tryPut(store: MessageStore, n: number): Promise<PutResult | undefined> {
  try {
    return await store.put({ kind: 1, type: 't', data: { n, DATA }, to: ['a'], clientMsgId: `m-${n}` });
  } catch (err) {
    if (isPixiuError(err, 'UNAVAILABLE')) {
      lastRefusal = err.message;
      return undefined;
    }
    throw err;
  }
}

test('after a write failed on a full disk, no put is acknowledged until the partition reopened, and none acknowledged is lost', async (t) => {
  const small = await storeOnSmallDisk(t);
  if (small === undefined) return;
  const { disk, dir, store, lines } = small;
  const acknowledged: PutResult[] = [];
  let n = 0;
  for (; n < 20; n++) acknowledged.push(await tryPut(store, n) as PutResult);

  const filler = await fill(disk);
  let refused = 0;
  while (refused === 0 && n < 2_000) {
    const put = await tryPut(store, n++);
    if (put === undefined) refused += 1;
    else acknowledged.push(put);
  }
  assert.equal(refused, 1, 'a put was refused once the disk was full');
  // The write that failed says why, in the words of the refusals after it (walk16 F3.1).
  const cause = /^message store partition 0 is reopening its database after a failed write \(No space left on device\)$/;
  assert.match(lastRefusal ?? '', cause);
  // Still full: the partition takes nothing (it may not write into its torn log), says
  // why (readiness), and reads go on.
  assert.equal(await tryPut(store, n++), undefined);
  assert.match(lastRefusal ?? '', cause);
  assert.match(store.writeProblem ?? '', /partition 0 is reopening its database after a failed write \(No space left on device\)/);
  // A try to reopen comes within a second, finds no room, and leaves the partition open.
  await waitUntil('a reopen is tried', async () => lines.some((l) => l.msg?.startsWith('store partition cannot reopen its database yet') === true));
  // A condition waited out: a warning with its reason, not a stack (an ops newcomer's finding).
  const waiting = lines.find((l) => l.msg?.startsWith('store partition cannot reopen its database yet') === true);
  assert.equal(waiting?.level, 40);
  assert.match(String(waiting?.reason), /bytes free on its disk, \d+ wanted/, JSON.stringify(waiting));
  assert.ok(!JSON.stringify(waiting).includes('"stack"'), `no stack: ${JSON.stringify(waiting)}`);
  assert.equal(await tryPut(store, n++), undefined, 'no reopen while the disk has no room for it');
  assert.deepEqual((await store.getMany(acknowledged.map((p) => p.id))).map((r) => r?.id), acknowledged.map((p) => p.id));
  // A sweep waits quietly for the reopen (a failed sweep is logged every round).
  assert.equal(await store.sweepNow(), 0);

  await rm(filler);
  // Space is back: puts are taken again once the partition has reopened.
  const deadline = Date.now() + 20_000;
  let taken = 0;
  while (taken < 20 && Date.now() < deadline) {
    const put = await tryPut(store, n++);
    if (put === undefined) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      continue;
    }
    acknowledged.push(put);
    taken += 1;
  }
  assert.equal(taken, 20, 'puts are taken again after the disk has room');
  assert.equal(store.writeProblem, undefined);
  // Reads answer throughout, from the reopened partition too.
  assert.equal((await store.getMany([acknowledged[0]?.id ?? '']))[0]?.id, acknowledged[0]?.id);
  await store.close();

  const reopened = await openStore(t, dir, { partitions: 1, cacheBytes: 0 });
  const found = await reopened.getMany(acknowledged.map((p) => p.id));
  const lost = acknowledged.filter((p, i) => found[i]?.id !== p.id).map((p) => p.id);
  assert.deepEqual(lost, [], `${lost.length} of ${acknowledged.length} acknowledged puts lost`);
});

test('a store that cannot open because its disk is full says so', async (t) => {
  const small = await storeOnSmallDisk(t);
  if (small === undefined) return;
  const { disk, dir, store } = small;
  for (let n = 0; n < 20; n++) await tryPut(store, n);
  await store.close();
  await fill(disk);
  await assert.rejects(MessageStore.open(storeOptions(dir, { partitions: 1 })), (err: Error) => {
    assert.ok(err instanceof StartupError, String(err));
    assert.match(err.message, /^store partition folder .*\/xiu\/0 cannot be opened: .*No space left on device — its disk is full: free space on it and start again$/);
    return true;
  });
});

test('a partition is reopened only when its disk has room for its largest log besides the spare bytes', async (t) => {
  // Sparse logs: their size, not the blocks they take, is what the reopen writes out again.
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pixiu-reopen-room-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(path.join(dir, '000003.log'), 'x'.repeat(1024));
  assert.equal(await lackOfRoomToReopen(dir), undefined, 'a small log on a disk with room');

  // Twice the free space: no room, however the free space moves meanwhile.
  const { bavail, bsize } = await statfs(dir);
  const size = 2 * bavail * bsize;
  await writeFile(path.join(dir, '000004.log'), '');
  await truncate(path.join(dir, '000004.log'), size);
  const lack = await lackOfRoomToReopen(dir);
  assert.ok(lack !== undefined, 'a log larger than the free space leaves no room for the reopen');
  assert.equal(lack.needed, size + REOPEN_SPARE_BYTES, 'the largest log plus the spare bytes');
  assert.ok(lack.free < lack.needed, JSON.stringify(lack));
});

test('a partition reopening after a failed write sweeps nothing, expired records included, until it has reopened', async (t) => {
  const small = await clockedStoreOnSmallDisk(t);
  if (small === undefined) return;
  const { disk, clock, store } = small;
  const expiring: PutResult[] = [];
  for (let n = 0; n < 10; n++) expiring.push(await store.put({ kind: 1, type: 't', data: { n, DATA }, to: ['a'], ttlMs: 1000 }));
  await fill(disk);
  let n = 0;
  while (store.writeProblem === undefined && n < 2_000) await tryPut(store, 1000 + n++);
  assert.match(store.writeProblem ?? '', /reopening its database after a failed write/);
  clock.ms += 5000;
  assert.equal(await store.sweepNow(), 0, 'the sweep waits for the reopen: no delete goes into the torn log');
  assert.match(store.writeProblem ?? '', /reopening its database after a failed write/);
});

/** How a write ended: 'written', 'refused' (UNAVAILABLE), or the other error. */
function outcome(write: Promise<unknown>): Promise<unknown> {
  return write.then(() => 'written', (err: unknown) => (isPixiuError(err, 'UNAVAILABLE') ? 'refused' : err));
}

test('puts queued behind a write that fails, and a counter advance, are refused even once the disk has room again: nothing goes after the tear', async (t) => {
  const small = await storeOnSmallDisk(t);
  if (small === undefined) return;
  const { disk, store } = small;
  const filler = await fill(disk);
  // Far more than the part of a page the full disk may have left: this write fails.
  const failing = store.put({ kind: 1, type: 't', data: 'x'.repeat(40_000), to: ['a'] });
  // One turn: the failing write is in libuv's pool when the next put is queued behind it.
  await new Promise((resolve) => setImmediate(resolve));
  const queued = outcome(store.put({ kind: 1, type: 't', data: 'small', to: ['a'] }));
  let advance: Promise<unknown> = Promise.resolve('not asked');
  const failed = outcome(failing.catch((err: unknown) => {
    // Room again before the queued put's turn (synchronously, in the failure's own
    // continuation): written now, it would go into the torn log, and be dropped with it.
    unlinkSync(filler);
    advance = outcome(store.advanceCounters([(store.counters[0] ?? 0) + 100]));
    throw err;
  }));
  assert.equal(await failed, 'refused', 'the write on the full disk failed');
  assert.equal(await queued, 'refused', 'the put queued behind it is refused, not written');
  assert.equal(await advance, 'refused', 'the counter advance is refused, not written');
});

test('a put queued behind a write that fails while the store closes is refused, not written after the tear and lost at the next open', async (t) => {
  const small = await storeOnSmallDisk(t);
  if (small === undefined) return;
  const { disk, dir, store } = small;
  const filler = await fill(disk);
  const failing = store.put({ kind: 1, type: 't', data: 'x'.repeat(40_000), to: ['a'] });
  await new Promise((resolve) => setImmediate(resolve));
  const queuedPut = store.put({ kind: 1, type: 't', data: 'small', to: ['a'] });
  const queued = outcome(queuedPut);
  // The close begins while the failing write is in flight: it drains the queued put.
  const closing = store.close();
  const failed = outcome(failing.catch((err: unknown) => {
    // Room again before the queued put's turn: written now, it would go after the tear.
    unlinkSync(filler);
    throw err;
  }));
  assert.equal(await failed, 'refused', 'the write on the full disk failed');
  assert.equal(await queued, 'refused', 'the put queued behind it is refused, not written');
  await closing;

  // Had it been acknowledged, it would have to be there after the next open.
  const put = await queuedPut.catch(() => undefined);
  const reopened = await openStore(t, dir, { partitions: 1, cacheBytes: 0 });
  if (put !== undefined) assert.notEqual((await reopened.getMany([put.id]))[0], null, `acknowledged ${put.id} lost`);
});

test('a sweep whose deletes fail on a full disk takes the partition out of writes, as a failed put does, and sweeps again once it has reopened', async (t) => {
  const small = await clockedStoreOnSmallDisk(t);
  if (small === undefined) return;
  const { disk, clock, store } = small;
  // Enough deletes that their batch outgrows what is left of the log's last page.
  await Promise.all(Array.from({ length: 400 }, (_, n) =>
    store.put({ kind: 1, type: 't', data: n, to: ['a'], ttlMs: 1000, clientMsgId: `sweep-${n}` })));
  const filler = await fill(disk);
  clock.ms += 5000;
  assert.equal(await outcome(store.sweepNow()), 'refused');
  assert.match(store.writeProblem ?? '', /partition 0 is reopening its database after a failed write/);
  // Room again: once the partition has reopened, a sweep deletes what the failed one did not.
  await rm(filler);
  await waitUntil('the partition reopens', async () => store.writeProblem === undefined);
  assert.equal(await store.sweepNow(), 400);
});
