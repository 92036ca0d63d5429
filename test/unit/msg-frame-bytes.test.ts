/**
 * A `msg` frame's bytes are exactly `JSON.stringify(frame)`'s, with the message's
 * `data` encoded once per node however many recipients' frames carry it
 * (src/delivery/msg-frame-bytes.ts); a `data` that cannot be serialised still becomes
 * an `undeliverable` gap of each recipient's seq (src/delivery/send-frame.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Inbox, InboxPage } from '../../src/inbox/inbox.js';
import type { RecordReader } from '../../src/store/record-reader.js';
import type { StoredMessage } from '../../src/store/record.js';
import { AckRounds } from '../../src/delivery/ack-rounds.js';
import type { MsgFrame } from '../../src/delivery/frames.js';
import { ENCODED_DATA_CACHE_BYTES, encodedDataCacheStats, msgFrameBytes } from '../../src/delivery/msg-frame-bytes.js';
import { UserSession, type DeliveryConnection } from '../../src/delivery/session.js';
import { createLogger } from '../../src/logger.js';
import { waitUntil } from '../harness/checks.js';

const big = 'x'.repeat(60_000);

test('msg frame bytes are JSON.stringify(frame) for every field combination and data shape', () => {
  const datas: unknown[] = [
    { i: 1, big }, { text: 'héllo "quoted" \\ \n \u2028 😀 \u0000' }, 'a plain string', 'é'.repeat(5_000), 42, null, true, [1, 'two', { three: [] }], {},
    { nested: { deep: [{ a: 1 }, { b: 'x'.repeat(2_000) }] } },
  ];
  for (const [n, data] of datas.entries()) {
    // One MsgID per data value: a message's data never changes (the cache's key).
    const id = `0000000000000a${n.toString(16).padStart(2, '0')}`;
    const frames: MsgFrame[] = [
      { t: 'msg', seq: 7, id, type: 'chat', ts: 1_700_000_000_000, data },
      { t: 'msg', seq: 8, id, type: 'chat', ts: 1, data, from: 'alice', room: 'r1', redelivered: true, epoch: 'E-1' },
      { t: 'msg', seq: 9, id, type: 't "q"', ts: 1, data, epoch: 'E\u00e9' },
      // The order a frame has is kept: messageView adds from and room after data.
      { t: 'msg', seq: 10, id, type: 't', room: 'r', ts: 1, data, from: 'bob' },
    ];
    for (const frame of frames) {
      const bytes = msgFrameBytes(frame);
      assert.equal(bytes.toString('utf8'), JSON.stringify(frame));
      // Twice: the second reads the cached data.
      assert.equal(msgFrameBytes(frame).toString('utf8'), JSON.stringify(frame));
    }
  }
});

test('around the size from which data is cached, and with no data written in a frame over it, the bytes are JSON.stringify(frame), first and again', () => {
  // 1024 bytes of data's JSON is where caching begins; the frame's other fields add ~60.
  const datas: unknown[] = [
    'a'.repeat(900), 'a'.repeat(960), 'a'.repeat(1022), 'a'.repeat(1100), 'é'.repeat(510), 'é'.repeat(520), '😀'.repeat(300),
    undefined, (): number => 1,
  ];
  const entries = encodedDataCacheStats().entries;
  for (const [n, data] of datas.entries()) {
    const id = `0000000000000d${n.toString(16).padStart(2, '0')}`;
    // A long type: frames over 1 KiB whose data writes nothing (undefined, a function) too.
    for (const type of ['chat', 't'.repeat(2_000)]) {
      const frame: MsgFrame = { t: 'msg', seq: 3, id, type, ts: 1, data, from: 'alice', epoch: 'E' };
      assert.equal(msgFrameBytes(frame).toString('utf8'), JSON.stringify(frame), `data ${n}, type of ${type.length}`);
      assert.equal(msgFrameBytes({ ...frame, seq: 4 }).toString('utf8'), JSON.stringify({ ...frame, seq: 4 }), `again: data ${n}, type of ${type.length}`);
    }
  }
  // The data of 1024 bytes or more: 'a' × 1022 and × 1100, 'é' × 520, '😀' × 300 (quotes counted).
  assert.equal(encodedDataCacheStats().entries - entries, 4, 'cached: each data of 1024 JSON bytes or more, once');
});

test('a message\'s data is encoded once for many frames, whichever decoded copy each holds; one that cannot be serialised throws for each', () => {
  let calls = 0;
  // Each recipient's record may be its own decoded copy (the store's read cache off, a cold read).
  const copy = (): unknown => ({ big, toJSON(): unknown { calls++; return { big }; } });
  for (let seq = 1; seq <= 100; seq++) {
    const frame: MsgFrame = { t: 'msg', seq, id: '0000000000000001', type: 't', ts: 1, data: copy() };
    assert.equal(msgFrameBytes(frame).toString(), `{"t":"msg","seq":${seq},"id":"0000000000000001","type":"t","ts":1,"data":{"big":"${big}"}}`);
  }
  assert.equal(calls, 1, 'the data was serialised once');
  const bad = { n: 1n };
  for (let seq = 1; seq <= 3; seq++) {
    assert.throws(() => msgFrameBytes({ t: 'msg', seq, id: '0000000000000002', type: 't', ts: 1, data: bad }), TypeError);
  }
});

test('a serialisation failure that depends on the stack (RangeError) is tried again; one of the value (TypeError) is not', () => {
  // A value nested deep enough overflows V8's stack only when the call already stands
  // deep: stood in for by a toJSON that overflows on its first call only.
  let deepCalls = 0;
  const deep = { toJSON(): unknown { if (deepCalls++ === 0) throw new RangeError('Maximum call stack size exceeded'); return { big }; } };
  const frame = (seq: number, id: string, data: unknown): MsgFrame => ({ t: 'msg', seq, id, type: 't', ts: 1, data });
  assert.throws(() => msgFrameBytes(frame(1, '00000000000000c1', deep)), RangeError);
  assert.equal(msgFrameBytes(frame(2, '00000000000000c1', deep)).toString(), JSON.stringify(frame(2, '00000000000000c1', { big })));
  assert.equal(msgFrameBytes(frame(3, '00000000000000c1', deep)).toString(), JSON.stringify(frame(3, '00000000000000c1', { big })));
  assert.equal(deepCalls, 2, 'tried again after the overflow, then cached');
  let badCalls = 0;
  const bad = { toJSON(): unknown { badCalls++; return { n: 1n }; } };
  for (let seq = 1; seq <= 3; seq++) assert.throws(() => msgFrameBytes(frame(seq, '00000000000000c2', bad)), TypeError);
  assert.equal(badCalls, 1, 'a BigInt fails alike at any depth: not serialised again');
});

/**
 * Sends `count` distinct messages of ~60 KB JSON whose decoded values are far larger
 * than their JSON (21,000 empty objects: ~0.9 MB of heap each, review2 measured 356 MB
 * kept for 400); weak references to their data values. (Not in the async test's own
 * frame: its registers would keep the last one.)
 */
function sendLargeValues(count: number): WeakRef<object>[] {
  const refs: WeakRef<object>[] = [];
  for (let n = 0; n < count; n++) {
    const data = Array.from({ length: 21_000 }, () => ({}));
    refs.push(new WeakRef(data));
    msgFrameBytes({ t: 'msg', seq: 1, id: `00000000000b${n.toString(16).padStart(4, '0')}`, type: 't', ts: 1, data });
  }
  return refs;
}

test('the cache holds the encoded bytes it counts, not the decoded data values (MsgID keys)', async () => {
  const refs = sendLargeValues(150);
  const stats = encodedDataCacheStats();
  assert.ok(stats.size <= ENCODED_DATA_CACHE_BYTES, `cache counts ${stats.size} bytes`);
  assert.ok(stats.entries >= 100, `${stats.entries} entries kept`);
  // WeakRef targets live to the end of the job that made them; then a full collection.
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  for (let i = 0; i < 3; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
  }
  assert.deepEqual(refs.flatMap((r, i) => (r.deref() === undefined ? [] : [i])), [], 'no data value is kept by the cache');
});

const id = (n: number): string => n.toString(16).padStart(16, '0');

/**
 * `users` sessions over one inbox page of seq `seqOf(user)` each holding `record` (the
 * same object for all: a fan-out's record, shared with the read cache);
 * frames received per user.
 */
function fanOut(record: StoredMessage, users: number): { sessions: UserSession[]; frames: Map<string, Array<Record<string, unknown>>> } {
  const frames = new Map<string, Array<Record<string, unknown>>>();
  const sessions: UserSession[] = [];
  const store: RecordReader = { isOpen: true, get: async () => record, getMany: async (ids: readonly string[]) => ids.map(() => record) };
  for (let u = 0; u < users; u++) {
    const user = `u${u}`;
    // Each user's inbox holds the message at a seq of its own.
    const page: InboxPage = { epoch: 'E', firstSeq: u + 1, latestSeq: u + 1, entries: [{ seq: u + 1, id: record.id, kind: 1 as const }] };
    const inbox = {
      range: async (_u: string, after: number) => ({ ...page, entries: page.entries.filter((e) => e.seq > after) }),
      ack: async (_u: string, _d: string, seq: number) => seq,
    } as unknown as Inbox;
    const machine = { window: 10, ackTimeoutMs: 60_000, backoffMs: [60_000], heartbeatMs: 60_000 };
    const session = new UserSession(user, { inbox, store, machine, logger: createLogger('silent'), retryMs: 60_000 }, new AckRounds(100));
    const got: Array<Record<string, unknown>> = [];
    frames.set(user, got);
    const conn: DeliveryConnection = { id: `c${u}`, device: 'd', send: (text) => { got.push(JSON.parse(text.toString()) as Record<string, unknown>); }, close: () => undefined };
    session.login(conn, { kind: 'first' });
    sessions.push(session);
  }
  return { sessions, frames };
}

test('every recipient of one large message gets its exact frame at its own seq', async () => {
  const record: StoredMessage = Object.freeze({ id: id(0x41), kind: 1, type: 'big', from: 'p', data: Object.freeze({ big, note: 'ünïcödé' }), ts: 5, expiresAt: Number.MAX_SAFE_INTEGER });
  const { sessions, frames } = fanOut(record, 200);
  try {
    await waitUntil('every msg', async () => [...frames.values()].every((f) => f.length === 2), 10_000, 5);
    for (const [user, got] of frames) {
      const seq = Number(user.slice(1)) + 1;
      assert.deepEqual(got[1], { t: 'msg', seq, id: id(0x41), type: 'big', ts: 5, data: { big, note: 'ünïcödé' }, from: 'p' });
    }
  } finally {
    sessions.forEach((s, u) => s.logout(`c${u}`));
  }
});

test('a large message that cannot be serialised is an undeliverable gap at each recipient\'s seq', async () => {
  const record: StoredMessage = { id: id(0x51), kind: 1, type: 'big', data: { big, n: 1n }, ts: 5, expiresAt: Number.MAX_SAFE_INTEGER };
  const { sessions, frames } = fanOut(record, 50);
  try {
    await waitUntil('every gap', async () => [...frames.values()].every((f) => f.length === 2), 10_000, 5);
    for (const [user, got] of frames) {
      const seq = Number(user.slice(1)) + 1;
      assert.deepEqual(got[1], { t: 'gap', from: seq, to: seq, reason: 'undeliverable' });
    }
  } finally {
    sessions.forEach((s, u) => s.logout(`c${u}`));
  }
});
