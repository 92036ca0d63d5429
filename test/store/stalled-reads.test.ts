/**
 * Reads keep a thread while writes stall. Every LevelDB operation runs on the libuv
 * pool (UV_THREADPOOL_SIZE threads, 4 unless set); a write to a stalled disk holds its
 * thread until the disk comes back. When the store let its partitions write on every
 * thread at once, four stalled writes took them all and every read queued behind them:
 * `GET /v1/messages/{id}`, history, delivery — even of records in partitions with no
 * write and pages in the page cache (a reviewer's finding, with `fsfreeze`). Now the
 * partitions' writes and the jobs between them (sweep steps) take at most one thread
 * fewer than the pool has (write-slots.ts), and a read of another partition answers.
 *
 * A real stalled disk: an ext4 loop device frozen with `fsfreeze` (root only;
 * test/harness/frozen-disk.ts). The pool is this process's: 4 threads unless the
 * environment sets UV_THREADPOOL_SIZE.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { MessageStore, type NewMessage, type PutResult } from '../../src/store/message-store.js';
import { MsgKind } from '../../src/ids/msg-id.js';
import { choosePartition } from '../../src/store/route.js';
import { threadPoolSize } from '../../src/store/write-slots.js';
import { fakeClock, storeOptions } from './fixtures/store-harness.js';
import { freezableDiskOrSkip } from '../harness/frozen-disk.js';
import { within } from '../harness/checks.js';

const PARTITIONS = 8;

/** A user message to a recipient whose partition is `p` (the store routes by recipient). */
function messageTo(p: number, n: number, ttlMs?: number): NewMessage {
  for (let i = 0; ; i++) {
    const msg: NewMessage = { kind: MsgKind.user, type: 't', data: { n }, to: [`u${i}`], ...(ttlMs !== undefined ? { ttlMs } : {}) };
    if (choosePartition(msg, PARTITIONS) === p) return msg;
  }
}

/** A store of 8 partitions on a freezable disk, closed (after a thaw) when the test ends; undefined when skipped. */
async function storeOnFreezableDisk(t: TestContext, now?: () => number): Promise<{ store: MessageStore; freeze: () => void } | undefined> {
  const disk = await freezableDiskOrSkip(t);
  if (disk === undefined) return undefined;
  // No read cache: every read goes to LevelDB, on the pool. The watchdog is not what is tested here.
  const store = await MessageStore.open(storeOptions(path.join(disk.dir, 'xiu'), {
    partitions: PARTITIONS, cacheBytes: 0, writeTimeoutMs: 600_000, ...(now !== undefined ? { now } : {}),
  }));
  disk.beforeUnmount(() => store.close());
  return { store, freeze: () => disk.freeze() };
}

test('with writes stalled on every thread they may take, a read of a record in another partition still answers', async (t) => {
  const opened = await storeOnFreezableDisk(t);
  if (opened === undefined) return;
  const { store, freeze } = opened;
  const kept = await store.put(messageTo(PARTITIONS - 1, 0));
  freeze();
  // A write in flight in every other partition: more than the pool has threads.
  assert.ok(threadPoolSize() < PARTITIONS, 'more partitions than threads');
  const stalled = Array.from({ length: PARTITIONS - 1 }, (_, p) => store.put(messageTo(p, 1)).catch(() => undefined));
  // A fixed wait: nothing says a write holds a thread blocked in the kernel (writesInFlight counts it before its slot).
  await new Promise((resolve) => setTimeout(resolve, 200));
  const read = await within(3_000, 'a read while writes stall', store.get(kept.id));
  assert.equal(read?.id, kept.id);
  void Promise.all(stalled);
});

test('with sweep steps stalled, a read still answers: the jobs between writes take write slots too', async (t) => {
  const clock = fakeClock();
  const opened = await storeOnFreezableDisk(t, clock.now);
  if (opened === undefined) return;
  const { store, freeze } = opened;
  // In every partition a record to sweep, and one that stays.
  const kept: PutResult[] = [];
  for (let p = 0; p < PARTITIONS; p++) {
    await store.put(messageTo(p, 0, 1_000));
    kept.push(await store.put(messageTo(p, 1)));
  }
  clock.ms += 10_000;
  freeze();
  // Every partition's sweep deletes: a write each, more than the pool has threads.
  const sweeping = store.sweepNow().catch(() => undefined);
  // As above: nothing says the sweeps' writes hold their threads, so a fixed wait.
  await new Promise((resolve) => setTimeout(resolve, 200));
  const read = await within(3_000, 'a read while sweeps stall', store.get(kept[0]?.id ?? ''));
  assert.equal(read?.id, kept[0]?.id);
  void sweeping;
});
