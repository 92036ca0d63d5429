import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isPixiuError } from '../../src/errors.js';
import { encodeMsgId } from '../../src/ids/msg-id.js';
import { MessageStore, type ReadRecord, type StoredMessage } from '../../src/store/message-store.js';
import { counterOf, openStore, partitionOf, storeOptions, tempDir } from './fixtures/store-harness.js';
import { decoded } from '../harness/checks.js';

test('10,000 concurrent puts over 8 partitions: ids unique, all readable, counters rise in issue and resolution order', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(t, dir);
  const resolved: string[] = [];
  const puts = Array.from({ length: 10_000 }, (_, i) =>
    store.put({ kind: 1, type: 'chat', data: { i }, to: [`user-${i}`] }).then((r) => {
      resolved.push(r.id);
      return r;
    }));
  const results = await Promise.all(puts);
  const ids = results.map((r) => r.id);

  assert.equal(new Set(ids).size, 10_000, 'ids are unique');
  assert.ok(results.every((r) => !r.duplicate));
  assert.equal(new Set(ids.map(partitionOf)).size, 8, 'every partition got puts');

  // Guaranteed per partition (partition.ts): counters are assigned in issue order and
  // puts resolve in counter order. Across partitions there is no order.
  for (const order of [ids, resolved]) {
    const last = new Map<number, number>();
    for (const id of order) {
      const p = partitionOf(id);
      assert.ok(counterOf(id) > (last.get(p) ?? 0), `counter of ${id} rises within partition ${p}`);
      last.set(p, counterOf(id));
    }
  }

  const read = await store.getMany(ids);
  read.forEach((r, i) => {
    assert.equal(r?.id, ids[i]);
    assert.deepEqual(decoded(r)?.data, { i });
  });
});

test('getMany answers in the order asked, null in place of missing, malformed and out-of-range ids', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(t, dir, { partitions: 4 });
  const a = await store.put({ kind: 1, type: 't', data: 'a', to: ['alice'] });
  const b = await store.put({ kind: 2, type: 't', data: 'b', room: 'room-9' });
  const c = await store.put({ kind: 3, type: 't', data: 'c' });
  assert.notEqual(partitionOf(a.id), partitionOf(b.id), 'fixture: two partitions at least');

  const missing = encodeMsgId({ partition: 1, kind: 1, counter: 999_999 });
  const beyondP = encodeMsgId({ partition: 200, kind: 1, counter: 1 });
  const asked = [b.id, 'not-an-id', a.id, missing, beyondP, c.id, 'ABCDEF0123456789', '', b.id, 42 as unknown as string];
  const got = await store.getMany(asked);
  assert.deepEqual(got.map((r) => decoded(r)?.data ?? null), ['b', null, 'a', null, null, 'c', null, null, 'b', null]);
  assert.equal(await store.get('zz'), null);
  assert.equal(decoded(await store.get(b.id))?.room, 'room-9');
});

test('a record reads back with every field it was stored with', async (t) => {
  const dir = await tempDir(t);
  const clock = { ms: 1_800_000_000_123 };
  const store = await openStore(t, dir, { now: () => clock.ms, defaultTtlMs: 5000 });
  const put = await store.put({ kind: 1, type: 'dm', from: 'bob', data: { x: 1 }, to: ['alice', 'carol'], clientMsgId: 'k-1', ttlMs: 9000 });
  const expected: StoredMessage = {
    id: put.id, kind: 1, type: 'dm', from: 'bob', data: { x: 1 }, to: ['alice', 'carol'], ts: 1_800_000_000_123,
    clientMsgId: 'k-1', expiresAt: 1_800_000_009_123,
  };
  assert.deepEqual(put.message, expected);
  await store.close();
  const reopened = await openStore(t, dir, { now: () => clock.ms });
  const read = await reopened.get(put.id);
  assert.deepEqual(read, expected);
  assert.ok(Object.isFrozen(read) && Object.isFrozen(read?.to), 'records read are frozen: the cache shares them');
  const other = await reopened.put({ kind: 1, type: 'dm', data: null, to: ['x'] });
  assert.equal(other.message.expiresAt, clock.ms + 3_600_000, 'default TTL when none is given');
  // A time from another clock (a room message's, Redis's) is its ts; retention counts
  // from the later of it and the store's clock.
  const earlier = await reopened.put({ kind: 2, type: 'r', data: 1, room: 'r', tsMs: clock.ms - 60_000, ttlMs: 1000 });
  assert.deepEqual([earlier.message.ts, earlier.message.expiresAt], [clock.ms - 60_000, clock.ms + 1000]);
  assert.equal(decoded(await reopened.get(earlier.id))?.ts, clock.ms - 60_000);
});

const controls = Array.from({ length: 31 }, (_, i) => String.fromCharCode(i + 1)).join('');
const unicode = {
  emoji: '😀👍🏽🇯🇵👨‍👩‍👧‍👦',
  cjk: '漢字かなカナ한국어中文',
  nul: '\u0000',
  controls,
  escapes: '"\\/\b\f\n\r\t',
  lone: ['\ud800', '\udfff', 'a\ud800b', '\udfff\ud800', '\udbff'],
  separators: '\u2028\u2029\ufeff\uffff',
  nested: { a: [1, -2.5, 1e21, 0, -0.000001, null, true, false, { b: [[], {}] }], s: '', n: null },
};
const bigText = 'xy€😀漢'.repeat(60 * 1024 / 12);

test('Unicode round-trips exactly: emoji, CJK, NUL, every control char, lone surrogates, a 60 KiB string', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(t, dir);
  const small = await store.put({ kind: 1, type: 'unicode', from: '\ud800from', data: unicode, to: ['😀', '\u0000'] });
  const big = await store.put({ kind: 1, type: 'big', data: bigText, to: ['u'] });
  assert.equal(Buffer.byteLength(bigText), 60 * 1024);
  const check = (read: (ReadRecord | null)[]): void => {
    const got = read.map((r) => decoded(r));
    assert.deepEqual(got[0]?.data, unicode);
    assert.equal(got[0]?.from, '\ud800from');
    assert.deepEqual(got[0]?.to, ['😀', '\u0000']);
    assert.equal(got[1]?.data, bigText);
  };
  check(await store.getMany([small.id, big.id]));
  await store.close();
  // Reopened: the cache is empty, the bytes come from disk.
  const reopened = await openStore(t, dir, { cacheBytes: 0 });
  check(await reopened.getMany([small.id, big.id]));
});

test('relaxed durability stores and reads back the same way', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(t, dir, { sync: false });
  const results = await Promise.all(Array.from({ length: 500 }, (_, i) => store.put({ kind: 1, type: 'r', data: i, to: [`u${i}`] })));
  await store.close();
  const reopened = await openStore(t, dir, { sync: false });
  const read = await reopened.getMany(results.map((r) => r.id));
  assert.deepEqual(read.map((r) => decoded(r)?.data), results.map((_, i) => i));
});

test('a closed store refuses puts and reads as UNAVAILABLE', async (t) => {
  const dir = await tempDir(t);
  const store = await MessageStore.open(storeOptions(dir, { partitions: 2 }));
  const { id } = await store.put({ kind: 1, type: 't', data: 1, to: ['a'] });
  assert.equal(store.isOpen, true);
  await store.close();
  assert.equal(store.isOpen, false);
  await assert.rejects(store.put({ kind: 1, type: 't', data: 1, to: ['a'] }), (err) => isPixiuError(err, 'UNAVAILABLE'));
  await assert.rejects(store.getMany([id]), (err) => isPixiuError(err, 'UNAVAILABLE'));
  await store.close();
});

test('a store that is closing refuses puts, lookups and sweeps at once, before its partitions have closed', async (t) => {
  const dir = await tempDir(t);
  const store = await MessageStore.open(storeOptions(dir, { partitions: 2 }));
  const closing = store.close();
  const unavailable = (err: unknown): boolean => isPixiuError(err, 'UNAVAILABLE');
  // Asked in the same turn as close(), while its partitions are still open.
  const asked = [store.put({ kind: 1, type: 't', data: 1, to: ['a'], clientMsgId: 'late' }), store.findByClientMsgId('late'), store.sweepNow()];
  for (const answer of asked) await assert.rejects(answer, unavailable);
  await closing;
  const reopened = await openStore(t, dir, { partitions: 2 });
  assert.equal(await reopened.findByClientMsgId('late'), null, 'nothing was stored');
});

test('puts in flight when close is called complete first', async (t) => {
  const dir = await tempDir(t);
  const store = await MessageStore.open(storeOptions(dir, { partitions: 2 }));
  const puts = Array.from({ length: 300 }, (_, i) => store.put({ kind: 1, type: 't', data: i, to: [`u${i}`], clientMsgId: i % 2 ? `c${i}` : undefined }));
  await store.close();
  const ids = (await Promise.all(puts)).map((r) => r.id);
  const reopened = await openStore(t, dir, { partitions: 2 });
  assert.ok((await reopened.getMany(ids)).every((r) => r !== null));
});

test('puts made while writes are held wait, then go ahead under the suspension in force then: stored, or refused with its reason', async (t) => {
  const store = await openStore(t, await tempDir(t));
  const message = { kind: 1 as const, type: 't', data: 'held', to: ['a'] };
  // A node starting: suspended until its lease is held, puts held meanwhile.
  store.suspendWrites('starting');
  let release: () => void = () => undefined;
  store.holdWritesUntil(new Promise<void>((resolve) => { release = resolve; }));
  let settled = false;
  const held = store.put(message).finally(() => { settled = true; });
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(settled, false, 'it waits');
  assert.equal(store.writeProblem, 'the message store takes no messages now: starting', '/readyz says why');
  store.suspendWrites(undefined); // the lease is held
  release();
  assert.equal((await held).message.data, 'held');
  // The next start finds another node serving the store: the held put is refused.
  store.suspendWrites('served elsewhere');
  let release2: () => void = () => undefined;
  store.holdWritesUntil(new Promise<void>((resolve) => { release2 = resolve; }));
  const refused = store.put(message);
  release2();
  await assert.rejects(refused, (err) => isPixiuError(err, 'UNAVAILABLE') && /served elsewhere/.test((err as Error).message));
});

test('a store holds exactly its partitions B..B+P-1: not the byte before its block, not the one after it', async (t) => {
  const store = await openStore(t, await tempDir(t), { partitions: 4, partitionBase: 8 });
  assert.deepEqual([7, 8, 11, 12].map((p) => store.hasPartition(p)), [false, true, true, false]);
  assert.deepEqual([7, 8, 11, 12].map((partition) => store.holds(encodeMsgId({ partition, kind: 1, counter: 1 }))), [false, true, true, false]);
  assert.equal(store.holds('not-an-id'), false);
});

test('a closed store refuses reads of records it has cached, and of malformed ids, as UNAVAILABLE', async (t) => {
  const store = await MessageStore.open(storeOptions(await tempDir(t), { partitions: 2 }));
  const put = await store.put({ kind: 1, type: 't', data: 1, to: ['a'] });
  store.remember(put);
  assert.equal(decoded(await store.get(put.id))?.data, 1, 'fixture: cached');
  await store.close();
  await assert.rejects(store.getMany([put.id]), (err) => isPixiuError(err, 'UNAVAILABLE'));
  await assert.rejects(store.get('not-an-id'), (err) => isPixiuError(err, 'UNAVAILABLE'));
});

test('puts wait for the latest hold: one that settles earlier does not release them', async (t) => {
  const store = await openStore(t, await tempDir(t));
  store.suspendWrites('starting');
  let releaseFirst: () => void = () => undefined;
  let releaseSecond: () => void = () => undefined;
  const first = new Promise<void>((resolve) => { releaseFirst = resolve; });
  store.holdWritesUntil(first);
  store.holdWritesUntil(new Promise<void>((resolve) => { releaseSecond = resolve; }));
  releaseFirst();
  await first;
  await new Promise((resolve) => setImmediate(resolve));
  // Still held by the second hold: not refused under the suspension in force now.
  const held = store.put({ kind: 1, type: 't', data: 'held', to: ['a'] });
  store.suspendWrites(undefined);
  releaseSecond();
  assert.equal((await held).message.data, 'held');
});

test('a record read from disk is kept in the read cache: the next read answers the same frozen record', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(t, dir, { partitions: 1 });
  const { id } = await store.put({ kind: 1, type: 't', data: { n: 1 }, to: ['a'] });
  await store.close();
  const reopened = await openStore(t, dir, { partitions: 1 });
  const first = await reopened.get(id);
  assert.deepEqual(decoded(first)?.data, { n: 1 });
  assert.equal(await reopened.get(id), first, 'the cached record, not a second decode of the disk bytes');
  // With the cache off every read decodes anew.
  await reopened.close();
  const uncached = await openStore(t, dir, { partitions: 1, cacheBytes: 0 });
  assert.notEqual(await uncached.get(id), await uncached.get(id));
});

test('puts without a client_msg_id in flight when close is called complete first too', async (t) => {
  const dir = await tempDir(t);
  const store = await MessageStore.open(storeOptions(dir, { partitions: 1 }));
  const puts = Array.from({ length: 300 }, (_, i) => store.put({ kind: 1, type: 't', data: i, to: [`u${i}`] }));
  await store.close();
  const ids = (await Promise.all(puts)).map((r) => r.id);
  const reopened = await openStore(t, dir, { partitions: 1 });
  assert.ok((await reopened.getMany(ids)).every((r) => r !== null));
});

test('records of 3-byte characters, written one after another into the shared encoding buffers, each read back whole', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(t, dir, { partitions: 1, cacheBytes: 0 });
  // Each record takes nearly three UTF-8 bytes per character: many fill buffer after buffer.
  const texts = Array.from({ length: 60 }, (_, i) => `${i}:${'€'.repeat(1500 + i)}`);
  const puts = await Promise.all(texts.map((data) => store.put({ kind: 1, type: 'euro', data, to: ['u'] })));
  assert.deepEqual((await store.getMany(puts.map((p) => p.id))).map((r) => decoded(r)?.data), texts);
});

test('a record larger than an encoding buffer, its recipient list uncounted by the size limit, reads back whole', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(t, dir, { partitions: 1, cacheBytes: 0 });
  // 3-byte characters: near the 64 KiB limit in data, and more in the recipients.
  const to = Array.from({ length: 20 }, (_, i) => `${i}${'€'.repeat(100)}`);
  const data = '€'.repeat(21_000);
  const put = await store.put({ kind: 1, type: 'big', data, to });
  assert.ok(put.bytes.length > 64 * 1024, String(put.bytes.length));
  const read = decoded(await store.get(put.id));
  assert.equal(read?.data, data);
  assert.deepEqual(read?.to, to);
});
