import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isPixiuError } from '../../src/errors.js';
import path from 'node:path';
import { storedUnder } from '../../src/store/client-id-index.js';
import { openPartitionDb, type PartitionDb } from '../../src/store/partition-db.js';
import { decodeRecord } from '../../src/store/record.js';
import { countKeys, counterOf, fakeClock, openStore, rawKeys, tempDir } from './fixtures/store-harness.js';
import { decoded } from '../harness/checks.js';

test('200 concurrent puts with one client_msg_id store one record and answer one MsgID', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(t, dir);
  const results = await Promise.all(Array.from({ length: 200 }, (_, i) =>
    store.put({ kind: 1, type: 'chat', data: { attempt: i }, to: [`user-${i}`], clientMsgId: 'once' })));

  assert.equal(new Set(results.map((r) => r.id)).size, 1, 'one MsgID');
  assert.equal(results.filter((r) => r.duplicate).length, 199);
  const first = results.find((r) => !r.duplicate);
  assert.deepEqual(first?.message.data, { attempt: 0 }, 'the first put is the one stored');
  for (const dup of results.filter((r) => r.duplicate)) assert.deepEqual(dup.message.data, { attempt: 0 }, 'duplicates answer the stored record');
  await store.close();

  const keys = await countKeys(dir, 8);
  assert.deepEqual(keys, { message: 1, clientId: 1, expiry: 1 }, 'exactly one record on disk, one index entry each');
});

test('a duplicate in a later batch, and after a reopen, answers the first id and stores nothing', async (t) => {
  const dir = await tempDir(t);
  // One partition, so counters of different client_msg_ids are comparable.
  const store = await openStore(t, dir, { partitions: 1 });
  const first = await store.put({ kind: 2, type: 'room', data: 1, room: 'r1', clientMsgId: 'k' });
  // Mixed into a batch of other puts of the same partition.
  const mixed = await Promise.all([
    store.put({ kind: 2, type: 'room', data: 'other-1', room: 'r1', clientMsgId: 'k-other' }),
    store.put({ kind: 2, type: 'room', data: 2, room: 'r1', clientMsgId: 'k' }),
    store.put({ kind: 2, type: 'room', data: 'other-2', room: 'r1' }),
  ]);
  assert.deepEqual(mixed.map((r) => r.duplicate), [false, true, false]);
  assert.equal(mixed[1]?.id, first.id);
  assert.equal(mixed[1]?.message.data, 1);
  await store.close();

  const reopened = await openStore(t, dir, { partitions: 1 });
  const again = await reopened.put({ kind: 2, type: 'room', data: 3, room: 'r1', clientMsgId: 'k' });
  assert.deepEqual([again.id, again.duplicate, again.message.data], [first.id, true, 1]);
  const next = await reopened.put({ kind: 2, type: 'room', data: 4, room: 'r1', clientMsgId: 'k-new' });
  await reopened.close();
  assert.equal(counterOf(next.id), 4, 'duplicates took no counter (1: first, 2 and 3: the other two)');

  const keys = await rawKeys(dir, 0);
  assert.equal(keys.clientIdValues.get('k'), first.id);
  assert.equal(keys.message.length, 4);
});

test('the same client_msg_id routes to the same partition whatever the recipients', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(t, dir);
  const a = await store.put({ kind: 1, type: 't', data: 1, to: ['alice'], clientMsgId: 'route-me' });
  const b = await store.put({ kind: 1, type: 't', data: 1, to: ['zed'], clientMsgId: 'route-me' });
  assert.equal(b.id, a.id);
  assert.equal(b.duplicate, true);
});

test('retries racing after the first is stored answer the stored record and its bytes, never another retry\'s (what a cache keeps)', async (t) => {
  const dir = await tempDir(t);
  const clock = fakeClock();
  const store = await openStore(t, dir, { partitions: 1, now: clock.now });
  const first = await store.put({ kind: 1, type: 't', data: 'original', to: ['a'], clientMsgId: 'X', ttlMs: 60_000 });
  clock.ms += 10_000;
  // R1 (other content: the API refuses it 409) is queued first; R2 waits on R1.
  const [r1, r2] = await Promise.all([
    store.put({ kind: 1, type: 't', data: 'conflicting', to: ['a'], clientMsgId: 'X', ttlMs: 3_600_000 }),
    store.put({ kind: 1, type: 't', data: 'original', to: ['a'], clientMsgId: 'X', ttlMs: 3_600_000 }),
  ]);
  for (const r of [r1, r2]) {
    assert.equal(r.id, first.id);
    assert.equal(r.duplicate, true);
    assert.equal(r.message.data, 'original');
    assert.deepEqual(decodeRecord(r.bytes, r.id), first.message, 'the bytes are the stored record\'s');
  }
  store.remember(r2); // what ingest does when a recipient is online
  assert.equal(decoded(await store.get(first.id))?.data, 'original');
  clock.ms = first.message.expiresAt + 1;
  assert.equal(await store.get(first.id), null, 'expired at its own time, not the retry\'s');
});

test('a ttl at the top of the allowed range is stored (or refused as invalid), never failing the other puts of its batch', async (t) => {
  const dir = await tempDir(t);
  const clock = fakeClock();
  const store = await openStore(t, dir, { partitions: 1, now: clock.now });
  for (const expiresAt of [2 ** 48 - 1, Math.floor((2 ** 48 - 1) / 1000) * 1000]) {
    const [plain, edge] = await Promise.allSettled([
      store.put({ kind: 1, type: 't', data: 'plain', to: ['a'] }),
      store.put({ kind: 1, type: 't', data: 'edge', to: ['b'], ttlMs: expiresAt - clock.ms }),
    ]);
    assert.equal(plain.status, 'fulfilled', `an ordinary put beside expiresAt ${expiresAt}`);
    if (edge.status === 'rejected') assert.ok(isPixiuError(edge.reason, 'INVALID_REQUEST'), String(edge.reason));
  }
});

test('findByClientMsgId waits for a put of that client_msg_id in flight and answers its record', async (t) => {
  const store = await openStore(t, await tempDir(t), { partitions: 2 });
  const put = store.put({ kind: 1, type: 't', data: 'first', to: ['a'], clientMsgId: 'in-flight' });
  const found = await store.findByClientMsgId('in-flight');
  assert.equal(found?.id, (await put).id);
  assert.equal(found?.data, 'first');
  assert.equal(await store.findByClientMsgId('never-put'), null);
});

for (const n of [1, 16, 24]) {
  test(`retries of ${n} stored message${n === 1 ? '' : 's'} in one batch each answer their own first record, and those expired are stored anew`, async (t) => {
    const clock = fakeClock();
    const store = await openStore(t, await tempDir(t), { partitions: 1, now: clock.now });
    const cids = Array.from({ length: n }, (_, i) => `many-${i}`);
    // Every third expires before the retries (the first one when n is 1: none).
    const expiring = (i: number): boolean => i % 3 === 2;
    const firsts = await Promise.all(cids.map((cid, i) =>
      store.put({ kind: 1, type: 't', data: i, to: ['a'], clientMsgId: cid, ttlMs: expiring(i) ? 1000 : 60_000 })));
    clock.ms += 2000;
    const retries = await Promise.all(cids.map((cid, i) => store.put({ kind: 1, type: 't', data: `retry ${i}`, to: ['a'], clientMsgId: cid })));
    retries.forEach((r, i) => {
      const first = firsts[i];
      if (expiring(i)) assert.deepEqual([r.id === first?.id, r.duplicate, r.message.data], [false, false, `retry ${i}`], `${cids[i]} expired: stored anew`);
      else assert.deepEqual([r.id, r.duplicate, r.message.data], [first?.id, true, i], `${cids[i]} answers its first record`);
    });
  });
}

test('the records of client_msg_ids found are read on the pool (getMany), never by getSync on the event loop', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(t, dir, { partitions: 1 });
  const cids = ['one', 'two', 'three'];
  const firsts = await Promise.all(cids.map((cid, i) => store.put({ kind: 1, type: 't', data: i, to: ['a'], clientMsgId: cid })));
  await store.close();
  const { db } = await openPartitionDb(path.join(dir, '0'), 0);
  t.after(() => db.close());
  // storedUnder uses these two reads; which keys each was asked for, by namespace byte.
  const sync: string[] = [];
  const pooled: string[] = [];
  const watched = {
    getSync: (key: Buffer) => { sync.push(String.fromCharCode(key[0] ?? 0)); return db.getSync(key); },
    getMany: (keys: Buffer[]) => { pooled.push(...keys.map((key) => String.fromCharCode(key[0] ?? 0))); return db.getMany(keys); },
  } as unknown as PartitionDb;
  const found = await storedUnder(watched, () => Date.now(), undefined, [...cids, 'never-put']);
  assert.deepEqual(found.map((f) => f?.id), [...firsts.map((f) => f.id), undefined]);
  assert.deepEqual(sync, ['c', 'c', 'c', 'c'], 'only the c keys are read synchronously');
  assert.deepEqual(pooled, ['m', 'm', 'm'], 'the records found, in one getMany');
});
