import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { GroupCommit } from '../../src/store/group-commit.js';
import { WriteSlots, threadPoolSize, writeSlotCount } from '../../src/store/write-slots.js';
import { WriteStall } from '../../src/store/write-stall.js';

/** A promise with its resolve, to hold a fake write open. */
function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** Lets `n` turns of the event loop pass (writes and jobs each start after one). */
async function turns(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** A writer that records its batches and holds each open until released. */
function heldWriter(): {
  batches: number[][];
  started: () => Promise<void>;
  release: () => void;
  write: (items: readonly number[]) => Promise<number[]>;
} {
  const batches: number[][] = [];
  let startedSignal = deferred();
  let gate = deferred();
  return {
    batches,
    started: () => startedSignal.promise,
    release: () => gate.resolve(),
    write: async (items) => {
      batches.push([...items]);
      const myGate = gate;
      startedSignal.resolve();
      startedSignal = deferred();
      await myGate.promise;
      gate = deferred();
      return items.map((i) => i * 10);
    },
  };
}

/**
 * A queue whose writes log `write <items>`, and exclusive jobs that log their start
 * and end and stay open until released.
 */
function loggedQueue(): {
  log: string[];
  commit: GroupCommit<string, string>;
  heldJob: (name: string) => { done: Promise<string>; started: Promise<void>; release: () => void };
} {
  const log: string[] = [];
  const commit = new GroupCommit<string, string>(async (items) => {
    log.push(`write ${items.join(',')}`);
    return [...items];
  }, 100);
  const heldJob = (name: string): { done: Promise<string>; started: Promise<void>; release: () => void } => {
    const started = deferred();
    const gate = deferred();
    const done = commit.exclusive(async () => {
      log.push(`${name} start`);
      started.resolve();
      await gate.promise;
      log.push(`${name} end`);
      return name;
    });
    return { done, started: started.promise, release: () => gate.resolve() };
  };
  return { log, commit, heldJob };
}

test('items added while a write is in flight all go into the next single write', async () => {
  const w = heldWriter();
  const commit = new GroupCommit<number, number>(w.write, 1000);
  const first = commit.add(1);
  await w.started();
  const later = [2, 3, 4, 5].map((i) => commit.add(i));
  w.release();
  assert.equal(await first, 10);
  await w.started();
  w.release();
  assert.deepEqual(await Promise.all(later), [20, 30, 40, 50]);
  assert.deepEqual(w.batches, [[1], [2, 3, 4, 5]]);
});

test('items added in one turn share one write; a batch holds at most maxBatch items', async () => {
  const batches: number[][] = [];
  const commit = new GroupCommit<number, number>(async (items) => {
    batches.push([...items]);
    return [...items];
  }, 2);
  const results = await Promise.all([1, 2, 3, 4, 5].map((i) => commit.add(i)));
  assert.deepEqual(results, [1, 2, 3, 4, 5]);
  assert.deepEqual(batches, [[1, 2], [3, 4], [5]]);
});

test('exclusive jobs run between writes, and items queued during a job are written before the next job', async () => {
  const { log, commit, heldJob } = loggedQueue();
  const job1 = heldJob('job1');
  const job2 = commit.exclusive(async () => {
    log.push('job2');
    return 'job2';
  });
  // Let job1 start, then queue items while it runs.
  await job1.started;
  const during = [commit.add('a'), commit.add('b')];
  job1.release();
  assert.deepEqual(await Promise.all([job1.done, job2, ...during]), ['job1', 'job2', 'a', 'b']);
  assert.deepEqual(log, ['job1 start', 'job1 end', 'write a,b', 'job2']);
  await commit.idle();
});

test('a failed write rejects its own items only; the next batch is written', async () => {
  let calls = 0;
  const commit = new GroupCommit<number, number>(async (items) => {
    calls++;
    if (calls === 1) throw new Error('disk full');
    return [...items];
  }, 100);
  const failed = [commit.add(1), commit.add(2)];
  await assert.rejects(failed[0] as Promise<number>, /disk full/);
  await assert.rejects(failed[1] as Promise<number>, /disk full/);
  assert.equal(await commit.add(3), 3);
});

test('write slots shared by queues are handed over in the order they were asked for', async () => {
  const slots = new WriteSlots(1);
  assert.equal(slots.acquire(), undefined, 'a free slot is taken at once');
  const granted: string[] = [];
  const waits = ['first', 'second', 'third'].map((name) => (slots.acquire() as Promise<void>).then(() => granted.push(name)));
  for (let i = 0; i < 3; i++) slots.release();
  await Promise.all(waits);
  assert.deepEqual(granted, ['first', 'second', 'third']);
  // The last holder gives its slot back to the free count: taken again at once.
  slots.release();
  assert.equal(slots.acquire(), undefined);
});

test('the write slots are one fewer than the threads of the pool, at least one (a thread is left to reads)', () => {
  assert.equal(writeSlotCount({}), 3);
  assert.equal(writeSlotCount({ UV_THREADPOOL_SIZE: '16' }), 15);
  assert.equal(writeSlotCount({ UV_THREADPOOL_SIZE: '2' }), 1);
  assert.equal(writeSlotCount({ UV_THREADPOOL_SIZE: '1' }), 1);
});

test('the pool size the write slots follow is UV_THREADPOOL_SIZE as libuv reads it: 4 when unset, zero or not a number, at most 1024', () => {
  assert.equal(threadPoolSize({}), 4);
  assert.equal(threadPoolSize({ UV_THREADPOOL_SIZE: '16' }), 16);
  assert.equal(threadPoolSize({ UV_THREADPOOL_SIZE: '1' }), 1);
  for (const garbage of ['0', '-3', 'lots', '2.5', '']) assert.equal(threadPoolSize({ UV_THREADPOOL_SIZE: garbage }), 4, garbage);
  assert.equal(threadPoolSize({ UV_THREADPOOL_SIZE: '1024' }), 1024);
  assert.equal(threadPoolSize({ UV_THREADPOOL_SIZE: '5000' }), 1024);
});

test('a batch writer answering another number of results than items rejects every item of the batch', async () => {
  const commit = new GroupCommit<number, number>(async (items) => items.slice(1), 100);
  const puts = [commit.add(1), commit.add(2)];
  for (const put of puts) await assert.rejects(put, /batch writer answered 1 results for 2 items/);
});

test('queues sharing one write slot never write at once: the second waits for the first write to end, its batch open meanwhile', async () => {
  const slots = new WriteSlots(1);
  const a = heldWriter();
  const b = heldWriter();
  const qa = new GroupCommit<number, number>(a.write, 100, { slots });
  const qb = new GroupCommit<number, number>(b.write, 100, { slots });
  const first = qa.add(1);
  await a.started();
  const waiting = [qb.add(2)];
  await turns(5);
  assert.deepEqual(b.batches, [], 'no second write while the only slot is held');
  waiting.push(qb.add(3));
  a.release();
  assert.equal(await first, 10);
  await b.started();
  b.release();
  assert.deepEqual(await Promise.all(waiting), [20, 30]);
  assert.deepEqual(b.batches, [[2, 3]], 'items added while waiting for the slot joined the batch');
});

test('an exclusive job that fails rejects its own caller only; writes and later jobs go on', async () => {
  const commit = new GroupCommit<number, number>(async (items) => [...items], 100);
  await assert.rejects(commit.exclusive(async () => {
    throw new Error('sweep step failed');
  }), /sweep step failed/);
  assert.equal(await commit.add(7), 7);
  assert.equal(await commit.exclusive(async () => 'next job'), 'next job');
  await commit.idle();
});

test('a slot handed to a waiter is not also counted free: the slot count holds after hand-overs', async () => {
  const slots = new WriteSlots(1);
  assert.equal(slots.acquire(), undefined);
  const waiter = slots.acquire() as Promise<void>;
  slots.release(); // handed to the waiter, who holds it now
  await waiter;
  assert.ok(slots.acquire() instanceof Promise, 'the one slot is held: a third asker waits');
  assert.throws(() => new WriteSlots(0), RangeError);
});

test('one write is in flight at a time: items added during a write start no second write before it ends', async () => {
  const w = heldWriter();
  const commit = new GroupCommit<number, number>(w.write, 1000);
  const first = commit.add(1);
  await w.started();
  const later = [commit.add(2)];
  await turns(5);
  later.push(commit.add(3));
  assert.deepEqual(w.batches, [[1]], 'no second write while the first is in flight');
  w.release();
  assert.equal(await first, 10);
  await w.started();
  w.release();
  assert.deepEqual(await Promise.all(later), [20, 30]);
  assert.deepEqual(w.batches, [[1], [2, 3]]);
});

test('an exclusive job holds writes off until it ends: an item added while it runs is written after it', async () => {
  const { log, commit, heldJob } = loggedQueue();
  const job = heldJob('job');
  await job.started;
  const put = commit.add('a');
  await turns(5);
  assert.deepEqual(log, ['job start'], 'no write while the job runs');
  job.release();
  await Promise.all([job.done, put]);
  assert.deepEqual(log, ['job start', 'job end', 'write a']);
});

/** Keeps the event loop running until the test ends: the watchdog's timer does not (unref). */
function keepAlive(t: TestContext): void {
  const timer = setInterval(() => undefined, 1000);
  t.after(() => clearInterval(timer));
}

test('the write watchdog (beside the real stalled disk of write-stall.test.ts): a write held past the limit fails every item waiting, in its batch and queued, once; the stall ends with the write', async (t) => {
  keepAlive(t);
  const w = heldWriter();
  const events: string[] = [];
  const dropped: number[] = [];
  let commit: GroupCommit<number, number> | undefined;
  const watch = new WriteStall({
    index: 0,
    limitMs: 50,
    onStall: (refusal) => {
      events.push('stall');
      dropped.push(...(commit?.failWaiting(refusal) ?? []));
    },
  });
  commit = new GroupCommit<number, number>(w.write, 100, { watch });
  const inFlight = commit.add(1);
  await w.started();
  const queued = commit.add(2);
  // The write is never released until both are answered.
  for (const put of [inFlight, queued]) await assert.rejects(put, /^PixiuError: message store partition 0 has had a write in flight for over 50 ms/);
  assert.deepEqual(dropped, [2], 'the queued item is taken out of the queue');
  assert.deepEqual(events, ['stall']);
  assert.equal(watch.stalled, true);
  w.release();
  await commit.idle();
  assert.deepEqual(events, ['stall']);
  assert.equal(watch.stalled, false, 'the stall ended with the write');
  assert.equal(watch.refusal(), undefined);
  assert.deepEqual(w.batches, [[1]], 'the dropped item is never written');
  const next = commit.add(3);
  await w.started();
  w.release();
  assert.equal(await next, 30);
});

test('the write watchdog never takes writes that each end within the limit for a stall, however long they go on', async (t) => {
  keepAlive(t);
  const events: string[] = [];
  const watch = new WriteStall({ index: 0, limitMs: 300, onStall: () => events.push('stall') });
  const commit = new GroupCommit<number, number>(async (items) => {
    await new Promise((resolve) => setTimeout(resolve, 20));
    return [...items];
  }, 100, { watch });
  const until = performance.now() + 1_000;
  for (let i = 0; performance.now() < until; i++) assert.equal(await commit.add(i), i);
  assert.deepEqual(events, []);
  watch.stop();
});

test('an exclusive job takes a write slot as a write does: with the only slot held by another queue\'s write, it waits', async () => {
  const slots = new WriteSlots(1);
  const a = heldWriter();
  const qa = new GroupCommit<number, number>(a.write, 100, { slots });
  const qb = new GroupCommit<number, number>(async (items) => [...items], 100, { slots });
  const write = qa.add(1);
  await a.started();
  let ran = false;
  const job = qb.exclusive(async () => {
    ran = true;
  });
  await turns(5);
  assert.equal(ran, false, 'no job while the only slot is held');
  a.release();
  await Promise.all([write, job]);
  assert.equal(ran, true);
});

test('the write watchdog takes no write that ended in the turn its overdue timer fired for a stall (an event loop held past the limit): the partition is not left refusing writes with none in flight', async () => {
  // The clock says the step has run past the limit when the timer fires, as after a
  // long pause; the step's end comes in that same turn, after the timer (here a timer
  // of the same length set just after it: one timers phase runs both, in order), before
  // the stall is judged (setImmediate). Judged stalled, no end() would ever clear it.
  let now = 0;
  const events: string[] = [];
  const watch = new WriteStall({ index: 0, limitMs: 50, clock: () => now, onStall: () => events.push('stall') });
  watch.begin();
  now = 1_000;
  await new Promise<void>((resolve) => setTimeout(() => {
    watch.end();
    resolve();
  }, 50));
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(events, []);
  assert.equal(watch.stalled, false);
  assert.equal(watch.refusal(), undefined);
  watch.stop();
});
