import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { SWEEP_CHUNK_RECORDS } from '../../src/store/expiry-sweep.js';
import { countKeys, fakeClock, idOfMessageKey, openStore, partitionOf, rawKeys, tempDir } from './fixtures/store-harness.js';
import { decoded } from '../harness/checks.js';

test('an expired record is never returned, then swept from all three key spaces; its client_msg_id stores anew', async (t) => {
  const dir = await tempDir(t);
  const clock = fakeClock();
  const opts = { partitions: 1, now: clock.now };
  const store = await openStore(t, dir, opts);
  const short = await store.put({ kind: 1, type: 't', data: 'short', to: ['a'], clientMsgId: 'k1', ttlMs: 1000 });
  const long = await store.put({ kind: 1, type: 't', data: 'long', to: ['a'], clientMsgId: 'k2', ttlMs: 60_000 });
  assert.equal(decoded(await store.get(short.id))?.data, 'short');

  clock.ms = short.message.expiresAt;
  // Not swept yet, and still in the read cache: neither may answer it.
  assert.equal(await store.get(short.id), null);
  assert.deepEqual((await store.getMany([short.id, long.id])).map((r) => decoded(r)?.data ?? null), [null, 'long']);

  clock.ms += 1000;
  assert.equal(await store.sweepNow(), 1);
  assert.equal(await store.sweepNow(), 0, 'a second sweep finds nothing');
  await store.close();

  const keys = await rawKeys(dir, 0);
  assert.deepEqual(keys.message.map(idOfMessageKey), [long.id]);
  assert.deepEqual([...keys.clientIdValues], [['k2', long.id]]);
  assert.equal(keys.expiry.length, 1, 'only the long-lived record is left in the expiry index');
  assert.equal(keys.expiry[0]?.subarray(9).toString('hex'), long.id);

  const reopened = await openStore(t, dir, opts);
  const again = await reopened.put({ kind: 1, type: 't', data: 'again', to: ['a'], clientMsgId: 'k1' });
  assert.equal(again.duplicate, false);
  assert.notEqual(again.id, short.id);
  assert.equal(await reopened.get(short.id), null);
});

test('an expired but unswept client_msg_id stores anew, and sweeping the old record keeps the new entry', async (t) => {
  const dir = await tempDir(t);
  const clock = fakeClock();
  // No cache: the expiry check on records read from disk is what answers here.
  const store = await openStore(t, dir, { partitions: 1, now: clock.now, cacheBytes: 0 });
  const old = await store.put({ kind: 1, type: 't', data: 'old', to: ['a'], clientMsgId: 'reused', ttlMs: 1000 });
  clock.ms += 2000;
  assert.deepEqual(await store.getMany([old.id]), [null]);
  const fresh = await store.put({ kind: 1, type: 't', data: 'fresh', to: ['a'], clientMsgId: 'reused' });
  assert.equal(fresh.duplicate, false, 'an expired first record does not make a duplicate');

  assert.equal(await store.sweepNow(), 1);
  const dup = await store.put({ kind: 1, type: 't', data: 'dup', to: ['a'], clientMsgId: 'reused' });
  assert.deepEqual([dup.id, dup.duplicate, dup.message.data], [fresh.id, true, 'fresh']);
  await store.close();
  const keys = await rawKeys(dir, 0);
  assert.equal(keys.clientIdValues.get('reused'), fresh.id);
  assert.deepEqual(keys.message.map(idOfMessageKey), [fresh.id]);
  assert.notEqual(old.id, fresh.id);
});

test('a sweep of many expiry entries goes in bounded steps and deletes them all', async (t) => {
  const dir = await tempDir(t);
  const clock = fakeClock();
  const store = await openStore(t, dir, { partitions: 2, now: clock.now });
  const ids: string[] = [];
  // 40 rounds one second apart: 1,600 records in 40 expiry entries per partition,
  // about 800 records per partition, so each sweeps in more than one step of 500.
  for (let round = 0; round < 40; round++) {
    const puts = await Promise.all(Array.from({ length: 40 }, (_, i) =>
      store.put({ kind: 1, type: 't', data: i, to: [`u${i}`], clientMsgId: i % 3 === 0 ? `r${round}-${i}` : undefined, ttlMs: 1000 })));
    ids.push(...puts.map((p) => p.id));
    clock.ms += 1000;
  }
  const keep = await store.put({ kind: 1, type: 't', data: 'keep', to: ['u'], ttlMs: 3_600_000 });
  clock.ms += 1000;
  const perPartition = [0, 1].map((p) => ids.filter((id) => partitionOf(id) === p).length);
  assert.ok(Math.max(...perPartition) > SWEEP_CHUNK_RECORDS, `a partition needs several steps (${perPartition.join(', ')})`);

  const sweeping = store.sweepNow();
  // Puts still go through while the sweep runs.
  const during = await store.put({ kind: 1, type: 't', data: 'during', to: ['u'] });
  assert.equal(await sweeping, 1600);
  assert.ok((await store.getMany(ids)).every((r) => r === null));
  assert.equal(decoded(await store.get(during.id))?.data, 'during');
  assert.equal(decoded(await store.get(keep.id))?.data, 'keep');
  await store.close();
  assert.deepEqual(await countKeys(dir, 2), { message: 2, clientId: 0, expiry: 2 }, 'only keep and during are left');
});

test('the sweeper runs on its timer and logs what it deleted', { timeout: 10_000 }, async (t) => {
  const dir = await tempDir(t);
  const clock = fakeClock();
  const lines: Record<string, unknown>[] = [];
  let onLine: (() => void) | undefined;
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      onLine?.();
      done();
    },
  });
  const logger = pino({ level: 'debug' }, sink);
  const store = await openStore(t, dir, { partitions: 1, now: clock.now, sweepIntervalMs: 10, logger });
  const { id } = await store.put({ kind: 1, type: 't', data: 1, to: ['a'], ttlMs: 1000 });
  const swept = new Promise<void>((resolve) => {
    onLine = () => {
      if (lines.some((l) => l.msg === 'expired messages swept')) resolve();
    };
  });
  clock.ms += 2000;
  // The sweeper's timer is unref'd (it must not keep a server alive): hold the loop open.
  const keepAlive = setInterval(() => undefined, 1000);
  await swept;
  clearInterval(keepAlive);
  assert.deepEqual(lines.find((l) => l.msg === 'expired messages swept')?.deleted, 1);
  await store.close();
  const keys = await rawKeys(dir, 0);
  assert.equal(keys.message.length, 0, `${id} was swept by the timer`);
});

test('a forward step of the wall clock while the store runs sweeps nothing early; the sweeps catch up as time really passes', async (t) => {
  const dir = await tempDir(t);
  const wall = fakeClock();
  // The monotonic clock: moves only with real time, never with the wall clock's steps.
  const mono = fakeClock(0);
  const store = await openStore(t, dir, { partitions: 1, now: wall.now, monotonic: mono.now, cacheBytes: 0 });
  const hour = 3_600_000;
  const kept = await store.put({ kind: 1, type: 't', data: 'kept', to: ['a'], clientMsgId: 'k', ttlMs: hour });
  const short = await store.put({ kind: 1, type: 't', data: 'short', to: ['a'], ttlMs: 1000 });

  // Two seconds pass, then the wall clock jumps two hours ahead.
  wall.ms += 2000;
  mono.ms += 2000;
  wall.ms += 2 * hour;
  assert.equal(await store.sweepNow(), 1, 'only the record expired by real time is swept');
  assert.equal(await store.get(kept.id), null, 'reads go by the wall clock while it is wrong');

  // The clock is set right again: the record is there, and its client_msg_id still names it.
  wall.ms -= 2 * hour;
  assert.equal(decoded(await store.get(kept.id))?.data, 'kept');
  const retry = await store.put({ kind: 1, type: 't', data: 'again', to: ['a'], clientMsgId: 'k', ttlMs: hour });
  assert.deepEqual([retry.id, retry.duplicate], [kept.id, true]);
  assert.equal(await store.get(short.id), null);

  // An hour of real time later it expires and is swept.
  wall.ms += hour;
  mono.ms += hour;
  assert.equal(await store.sweepNow(), 1);
  await store.close();
  assert.deepEqual(await countKeys(dir, 1), { message: 0, clientId: 0, expiry: 0 });
});

test('a store opened with its clock two hours ahead of Redis\'s sweeps nothing until Redis\'s clock is known, then nothing past it: records with an hour left stay (walk31 F2)', async (t) => {
  const dir = await tempDir(t);
  const hour = 3_600_000;
  // A run with a true clock stores a record with an hour to live and one with a second.
  const truth = fakeClock();
  const first = await openStore(t, dir, { partitions: 1, now: truth.now, monotonic: truth.now, cacheBytes: 0 });
  const kept = await first.put({ kind: 1, type: 't', data: 'kept', to: ['a'], clientMsgId: 'k', ttlMs: hour });
  const short = await first.put({ kind: 1, type: 't', data: 'short', to: ['a'], ttlMs: 1000 });
  await first.close();

  // Two seconds later the node starts again with its clock two hours ahead (an RTC kept
  // in local time); the registry has not measured Redis's clock yet.
  truth.ms += 2000;
  const wall = fakeClock(truth.ms + 2 * hour);
  const mono = fakeClock(0);
  let redis: number | undefined;
  const store = await openStore(t, dir, { partitions: 1, now: wall.now, monotonic: mono.now, cacheBytes: 0, redisClock: () => redis });
  assert.equal(await store.sweepNow(), 0, 'no sweep before Redis\'s clock is known');
  redis = truth.ms;
  assert.equal(await store.sweepNow(), 1, 'only the record expired by Redis\'s clock is swept');
  wall.ms += 1000;
  mono.ms += 1000;
  redis += 1000;
  assert.equal(await store.sweepNow(), 0, 'and no more as time passes');
  await store.close();

  // The clock put right: the record is there, and its client_msg_id still names it.
  const again = await openStore(t, dir, { partitions: 1, now: () => redis ?? 0, cacheBytes: 0 });
  assert.equal(decoded(await again.get(kept.id))?.data, 'kept');
  assert.equal(await again.get(short.id), null);
  const retry = await again.put({ kind: 1, type: 't', data: 'again', to: ['a'], clientMsgId: 'k', ttlMs: hour });
  assert.deepEqual([retry.id, retry.duplicate], [kept.id, true]);
});

test('a client_msg_id retry on a store reopened two hours ahead of Redis\'s clock is answered with the first record while it lives by Redis\'s clock (review-clock R1)', async (t) => {
  const dir = await tempDir(t);
  const hour = 3_600_000;
  const truth = fakeClock();
  const first = await openStore(t, dir, { partitions: 1, now: truth.now, monotonic: truth.now, cacheBytes: 0 });
  const kept = await first.put({ kind: 1, type: 't', data: 'kept', to: ['a'], clientMsgId: 'k', ttlMs: hour });
  await first.close();

  // Restarted two hours ahead: by its own clock the record expired an hour ago, by Redis's it has an hour left.
  truth.ms += 2000;
  const wall = fakeClock(truth.ms + 2 * hour);
  const store = await openStore(t, dir, { partitions: 1, now: wall.now, cacheBytes: 0, redisClock: () => truth.ms });
  const retry = await store.put({ kind: 1, type: 't', data: 'kept', to: ['a'], clientMsgId: 'k', ttlMs: hour });
  assert.deepEqual([retry.id, retry.duplicate], [kept.id, true], 'no second copy under a new id');

  // Once it has expired by Redis's clock less the second tolerated (the sweeps' bound), a retry stores anew.
  truth.ms = kept.message.expiresAt - 1000;
  const anew = await store.put({ kind: 1, type: 't', data: 'anew', to: ['a'], clientMsgId: 'k', ttlMs: hour });
  assert.equal(anew.duplicate, false);
  assert.notEqual(anew.id, kept.id);
});

test('a new message\'s expiry counts from Redis\'s clock when the store\'s is behind it, from the store\'s when ahead; its ts is the store\'s (walk31 F3)', async (t) => {
  const dir = await tempDir(t);
  const wall = fakeClock();
  let redis: number | undefined;
  const store = await openStore(t, dir, { partitions: 1, now: wall.now, cacheBytes: 0, redisClock: () => redis });
  const expiry = async (n: number): Promise<[number, number]> => {
    const put = await store.put({ kind: 1, type: 't', data: n, to: ['a'], ttlMs: 60_000 });
    const record = decoded(await store.get(put.id));
    return [record?.ts ?? -1, record?.expiresAt ?? -1];
  };
  assert.deepEqual(await expiry(1), [wall.ms, wall.ms + 60_000], 'Redis\'s clock not known yet: the store\'s');
  redis = wall.ms + 600_000;
  assert.deepEqual(await expiry(2), [wall.ms, redis - 1000 + 60_000], 'the store ten minutes behind: from Redis\'s clock less the second tolerated');
  redis = wall.ms + 900;
  assert.deepEqual(await expiry(3), [wall.ms, wall.ms + 60_000], 'in step (within a second): ts + ttl exactly');
  redis = wall.ms - 600_000;
  assert.deepEqual(await expiry(4), [wall.ms, wall.ms + 60_000], 'the store ten minutes ahead');
});

test('a record is expired from the very ms of its expiresAt: a read from disk and a retry of its client_msg_id treat it as gone', async (t) => {
  const dir = await tempDir(t);
  const clock = fakeClock();
  // No cache: the store's own expiry checks (disk read, duplicate lookup) answer here.
  const store = await openStore(t, dir, { partitions: 1, now: clock.now, cacheBytes: 0 });
  const first = await store.put({ kind: 1, type: 't', data: 'first', to: ['a'], clientMsgId: 'edge', ttlMs: 1000 });

  clock.ms = first.message.expiresAt - 1;
  assert.equal(decoded(await store.get(first.id))?.data, 'first', 'live one ms before its expiresAt');
  const retry = await store.put({ kind: 1, type: 't', data: 'first', to: ['a'], clientMsgId: 'edge', ttlMs: 1000 });
  assert.deepEqual([retry.id, retry.duplicate], [first.id, true]);

  clock.ms = first.message.expiresAt;
  assert.deepEqual(await store.getMany([first.id]), [null], 'expired at its expiresAt: never returned');
  const anew = await store.put({ kind: 1, type: 't', data: 'anew', to: ['a'], clientMsgId: 'edge', ttlMs: 1000 });
  assert.equal(anew.duplicate, false, 'a record expired at this very ms is no duplicate');
  assert.notEqual(anew.id, first.id);
});

test('a record expiring mid-second is swept once its expiry second is reached, and never before it expires', async (t) => {
  const dir = await tempDir(t);
  const clock = fakeClock();
  const store = await openStore(t, dir, { partitions: 1, now: clock.now, cacheBytes: 0 });
  // Stored half a second into a second: it expires mid-second, and is indexed under the next whole second.
  clock.ms += 500;
  const put = await store.put({ kind: 1, type: 't', data: 'mid', to: ['a'], clientMsgId: 'mid', ttlMs: 1000 });
  const expiresAt = put.message.expiresAt;
  assert.notEqual(expiresAt % 1000, 0, 'the expiry is not a whole second');

  clock.ms = expiresAt - 1;
  assert.equal(await store.sweepNow(), 0, 'a live record is never swept');
  assert.equal(decoded(await store.get(put.id))?.data, 'mid');
  const dup = await store.put({ kind: 1, type: 't', data: 'mid', to: ['a'], clientMsgId: 'mid', ttlMs: 1000 });
  assert.deepEqual([dup.id, dup.duplicate], [put.id, true], 'its client_msg_id still names it');

  clock.ms = expiresAt;
  assert.equal(await store.get(put.id), null);
  // Swept at most a second after it expired (keys.ts): at the whole second it is indexed
  // under, with its idempotency entry.
  clock.ms = Math.ceil(expiresAt / 1000) * 1000;
  assert.equal(await store.sweepNow(), 1, 'swept at its expiry second');
  await store.close();
  assert.deepEqual(await countKeys(dir, 1), { message: 0, clientId: 0, expiry: 0 });
});

test('a remembered record (cached as its written bytes, never read) is not served from the cache from its expiresAt on', async (t) => {
  const dir = await tempDir(t);
  const clock = fakeClock();
  const store = await openStore(t, dir, { partitions: 1, now: clock.now });
  const put = await store.put({ kind: 1, type: 't', data: 'cached', to: ['a'], ttlMs: 1000 });
  // What ingest does for a recipient online: the record's bytes go into the read cache.
  store.remember(put);
  // Not read before: the first read finds the cached bytes, not a decoded record.
  clock.ms = put.message.expiresAt;
  assert.equal(await store.get(put.id), null, 'expired at its expiresAt, cached or not');
});

test('the sweeper keeps running on its timer: a record expiring after the first sweep is swept by a later one', { timeout: 10_000 }, async (t) => {
  const dir = await tempDir(t);
  const clock = fakeClock();
  const swept: number[] = [];
  let onSweep: (() => void) | undefined;
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      const line = JSON.parse(chunk.toString()) as Record<string, unknown>;
      if (line.msg === 'expired messages swept') {
        swept.push(line.deleted as number);
        onSweep?.();
      }
      done();
    },
  });
  const store = await openStore(t, dir, { partitions: 1, now: clock.now, sweepIntervalMs: 10, logger: pino({ level: 'debug' }, sink) });
  const sweeps = (count: number): Promise<void> => new Promise((resolve) => {
    onSweep = () => { if (swept.length >= count) resolve(); };
    onSweep();
  });
  // The sweeper's timer is unref'd (it must not keep a server alive): hold the loop open.
  const keepAlive = setInterval(() => undefined, 1000);
  t.after(() => clearInterval(keepAlive));
  await store.put({ kind: 1, type: 't', data: 1, to: ['a'], ttlMs: 1000 });
  clock.ms += 2000;
  await sweeps(1);
  const { id } = await store.put({ kind: 1, type: 't', data: 2, to: ['a'], ttlMs: 1000 });
  clock.ms += 2000;
  await sweeps(2);
  assert.deepEqual(swept, [1, 1]);
  await store.close();
  assert.equal((await rawKeys(dir, 0)).message.length, 0, `${id} was swept by a later sweep`);
});

test('the records of one batch share one expiry entry per expiry second, and each is swept from it', async (t) => {
  const dir = await tempDir(t);
  const clock = fakeClock();
  const store = await openStore(t, dir, { partitions: 1, now: clock.now });
  // Issued in one turn: one batch. Expiries 1.000 s to 1.099 s from now, one second's worth.
  const puts = await Promise.all(Array.from({ length: 100 }, (_, i) =>
    store.put({ kind: 1, type: 't', data: i, to: ['a'], ttlMs: 1000 + i, clientMsgId: `batch-${i}` })));
  await store.close();
  const keys = await rawKeys(dir, 0);
  assert.equal(keys.expiry.length, 2, 'the second at 1.000 s, and the next one for the rest');
  const reopened = await openStore(t, dir, { partitions: 1, now: clock.now });
  clock.ms += 2000;
  assert.equal(await reopened.sweepNow(), puts.length);
  await reopened.close();
  assert.deepEqual(await countKeys(dir, 1), { message: 0, clientId: 0, expiry: 0 });
});

test('closing the store stops a running sweep between its steps; the next open sweeps the rest', async (t) => {
  const dir = await tempDir(t);
  const clock = fakeClock();
  // The sweeper's timer fires when the test ticks it, so the close begins with a sweep under way.
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const store = await openStore(t, dir, { partitions: 1, now: clock.now, sweepIntervalMs: 10 });
  // 8,000 records in 80 expiry entries of 100 (one per batch): 16 steps of 500.
  const total = 8000;
  for (let round = 0; round < total / 100; round++) {
    await Promise.all(Array.from({ length: 100 }, (_, i) => store.put({ kind: 1, type: 't', data: i, to: ['a'], ttlMs: 1000 })));
  }
  clock.ms += 2000;
  t.mock.timers.tick(10);
  // One turn: the sweep has begun its first step.
  await new Promise((resolve) => setImmediate(resolve));
  await store.close();
  t.mock.timers.reset();

  const reopened = await openStore(t, dir, { partitions: 1, now: clock.now });
  const left = await reopened.sweepNow();
  assert.ok(left >= total - 2 * SWEEP_CHUNK_RECORDS, `the close waited for a step or two, not the whole backlog: ${total - left} of ${total} swept before it closed`);
  await reopened.close();
  assert.deepEqual(await countKeys(dir, 1), { message: 0, clientId: 0, expiry: 0 }, 'the next open swept the rest');
});
