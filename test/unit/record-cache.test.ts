/**
 * RecordCache (src/store/record-cache.ts): bounded by the memory its records take, each
 * counting its stored bytes and ENTRY_OVERHEAD_BYTES — written or decoded, local or
 * another node's — so a cache of N such records' worth holds N of them, not twice as
 * many (a soak test found a 64 MiB cache holding ~150 MB).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import v8 from 'node:v8';
import vm from 'node:vm';
import { ENTRY_OVERHEAD_BYTES, RecordCache } from '../../src/store/record-cache.js';
import { prepareRecord, type StoredMessage } from '../../src/store/record.js';
import { MsgKind } from '../../src/ids/msg-id.js';

const NOW = 1_800_000_000_000;
const LIMITS = { defaultTtlMs: 3_600_000, maxMessageBytes: 65_536 };

/** Stored bytes of a chat-sized record, all of one length. */
function recordBytes(i: number): Buffer {
  return Buffer.from(prepareRecord({ kind: MsgKind.user, type: 'chat.text', data: { text: `hello ${String(i).padStart(4, '0')}` } }, NOW, LIMITS).bytes);
}

const id = (i: number): string => (0x0100000000000000n + BigInt(i)).toString(16).padStart(16, '0');

test('a cache sized for three records holds three, written or decoded: the fourth evicts the oldest', () => {
  const size = recordBytes(0).length;
  const cache = new RecordCache(3 * (size + ENTRY_OVERHEAD_BYTES));
  for (let i = 0; i < 3; i++) cache.setWritten(id(i), recordBytes(i));
  // Decoding one on read keeps its count (the stored bytes and the overhead).
  assert.equal((cache.get(id(0), NOW) as StoredMessage).id, id(0));
  for (let i = 0; i < 3; i++) assert.notEqual(cache.get(id(i), NOW), undefined, `record ${i} cached`);
  cache.setWritten(id(3), recordBytes(3));
  assert.equal(cache.get(id(0), NOW), undefined, 'the least recently used went');
  for (let i = 1; i < 4; i++) assert.notEqual(cache.get(id(i), NOW), undefined, `record ${i} cached`);
});

test('a record read from disk or another node counts its size and the overhead too', () => {
  const size = 200;
  const cache = new RecordCache(2 * (size + ENTRY_OVERHEAD_BYTES));
  const message = (i: number): StoredMessage => ({ id: id(i), kind: MsgKind.user, type: 't', data: i, ts: NOW, expiresAt: NOW + 1000 });
  cache.setRead(message(0), size);
  cache.setRead(message(1), size);
  assert.notEqual(cache.get(id(0), NOW), undefined);
  cache.setRead(message(2), size);
  assert.equal(cache.get(id(1), NOW), undefined, 'two fit, not more');
  assert.notEqual(cache.get(id(2), NOW), undefined);
});

test('a full cache of decoded chat-sized records takes about its size in heap, not twice it', () => {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  const maxBytes = 8 * 1024 * 1024;
  gc();
  const before = process.memoryUsage().heapUsed;
  const cache = new RecordCache(maxBytes);
  // Three times what fits: the cache is full, of decoded records (what reads leave).
  const count = Math.ceil((3 * maxBytes) / (recordBytes(0).length + ENTRY_OVERHEAD_BYTES));
  for (let i = 0; i < count; i++) {
    cache.setWritten(id(i), recordBytes(i));
    cache.get(id(i), NOW);
  }
  gc();
  const used = process.memoryUsage().heapUsed - before;
  assert.notEqual(cache.get(id(count - 1), NOW), undefined, 'the cache is alive and holds the newest');
  assert.ok(used > 0.6 * maxBytes && used < 1.3 * maxBytes, `${(used / 1048576).toFixed(1)} MiB of heap for a cache of ${maxBytes / 1048576} MiB`);
});

test('a written record is decoded once: later reads answer the same frozen object', () => {
  const cache = new RecordCache(1024 * 1024);
  cache.setWritten(id(0), recordBytes(0));
  const first = cache.get(id(0), NOW) as StoredMessage;
  assert.ok(Object.isFrozen(first));
  assert.equal(cache.get(id(0), NOW), first);
});

test('deleteStartingWith drops the records of one partition and keeps the others', () => {
  const cache = new RecordCache(1024 * 1024);
  const other = (i: number): string => (0x0200000000000000n + BigInt(i)).toString(16).padStart(16, '0');
  for (let i = 0; i < 3; i++) {
    cache.setWritten(id(i), recordBytes(i));
    cache.setWritten(other(i), recordBytes(i));
  }
  cache.deleteStartingWith('01');
  for (let i = 0; i < 3; i++) {
    assert.equal(cache.get(id(i), NOW), undefined, `${id(i)} dropped`);
    assert.notEqual(cache.get(other(i), NOW), undefined, `${other(i)} kept`);
  }
});
