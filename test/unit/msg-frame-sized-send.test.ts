/**
 * A `msg` frame sized for a page's byte cut and then sent is written once
 * (src/delivery/msg-frame-bytes.ts: `msgFrameSize` keeps what it wrote for the frame
 * object, `msgFrameBytes` takes it), and what goes out is still byte for byte
 * `JSON.stringify(frame)`: after a field of the frame changed since its sizing (the
 * `epoch` a first `msg` is given after the page is sized), and when it cannot be
 * serialised (a `gap`; a RangeError tried again). review34a F2: a `data` of ~340 –
 * 1,000 characters was stringified whole to size it, and again to send it.
 */
// test-isolation: own-process (it counts frameWrites(), the process's whole-frame writes: another file's late send in the same process would move the count)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Inbox, InboxPage } from '../../src/inbox/inbox.js';
import type { RecordReader } from '../../src/store/record-reader.js';
import type { StoredMessage } from '../../src/store/record.js';
import { AckRounds } from '../../src/delivery/ack-rounds.js';
import { deliverPage, type Conn } from '../../src/delivery/connection-state.js';
import type { Effect } from '../../src/delivery/effects.js';
import type { MsgFrame } from '../../src/delivery/frames.js';
import { frameWrites, msgFrameBytes, msgFrameSize } from '../../src/delivery/msg-frame-bytes.js';
import { sendFrame } from '../../src/delivery/send-frame.js';
import { UserSession, type DeliveryConnection } from '../../src/delivery/session.js';
import { createLogger } from '../../src/logger.js';

/** MsgIDs of this file only: the frame-data cache by MsgID is the process's (test groups). */
let n = 0;
function msgId(): string {
  return `5e5e${(++n).toString(16).padStart(12, '0')}`;
}

/** A ~600-character `data` (~620 bytes of JSON): past the size bound's reach, under the cache by MsgID's 1 KiB. */
const medium = (i: number): { text: string; i: number } => ({ text: `m${i} "é"`.padEnd(600, 'w'), i });

function record(id: string, data: unknown): StoredMessage {
  return Object.freeze({ id, kind: 1 as const, type: 'chat.text', from: 'ana', data, ts: 1_700_000_000_000, expiresAt: Number.MAX_SAFE_INTEGER });
}

test('a page of ~600-character messages cut by bytes: each frame written once, sent as JSON.stringify(frame), cut at its exact size', async () => {
  const records = Array.from({ length: 6 }, (_, i) => record(msgId(), medium(i)));
  const page: InboxPage = { epoch: 'E', firstSeq: 1, latestSeq: 6, entries: records.map((r, i) => ({ seq: i + 1, id: r.id, kind: 1 as const })) };
  const inbox = {
    range: async (_u: string, after: number) => ({ ...page, entries: page.entries.filter((e) => e.seq > after) }),
    ack: async (_u: string, _d: string, s: number) => s,
  } as unknown as Inbox;
  const byId = new Map(records.map((r) => [r.id, r]));
  const store: RecordReader = { isOpen: true, get: async (id: string) => byId.get(id) ?? null, getMany: async (ids: readonly string[]) => ids.map((id) => byId.get(id) ?? null) };
  const expected = records.map((r, i) => JSON.stringify({ t: 'msg', seq: i + 1, id: r.id, type: r.type, ts: r.ts, data: r.data, from: r.from }));
  const frameSize = Buffer.byteLength(expected[0] as string) + 4; // every frame as long: 126 – 65,535 bytes, a 4-byte header
  const sent: string[] = [];
  const held: boolean[] = [];
  const conn: DeliveryConnection = {
    id: 'c1', device: 'd', close: () => undefined,
    send: (text, t) => { if (t === 'msg') sent.push(text.toString()); },
    // Room for three frames to the byte, the node budget's floor: the page stops after the third, its hold the budget's.
    byteAllowance: () => ({ bytes: 3 * frameSize, byBudget: true }),
    hold: (byBudget) => { held.push(byBudget); },
  };
  const session = new UserSession('u1', { inbox, store, machine: { window: 10, ackTimeoutMs: 60_000, backoffMs: [60_000], heartbeatMs: 60_000 }, logger: createLogger('silent'), retryMs: 60_000 }, new AckRounds(100));
  const before = frameWrites();
  session.login(conn, { kind: 'first' });
  try {
    for (let i = 0; i < 100 && held.length === 0; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(held, [true], 'the page was cut, at an allowance that was the budget\'s (the hold says so)');
    assert.deepEqual(sent, expected.slice(0, 3), 'cut after the third frame: sized exactly; each sent as JSON.stringify(frame)');
    assert.deepEqual(frameWrites(), { whole: before.whole + 3, around: before.around }, 'three frames sized and sent, each stringified once (twice each without the kept bytes)');
  } finally {
    session.logout('c1');
  }
});

/** A ready connection told `epoch: null` at its welcome (no inbox then), nothing sent yet. */
function untoldConn(): Conn {
  return {
    id: 'c', device: 'd', room: { byteAllowance: () => ({ bytes: 1 << 20, byBudget: false }) }, phase: 'ready', resume: { kind: 'first' }, acked: 0, stored: 0, sent: 0, sendsAfter: 0,
    inflight: [], redeliverUpTo: 0, hadThrough: 0, resent: undefined, rounds: 0, paused: false, servedAt: 0, liveAfter: 0, epochUntold: true,
  };
}

test('a frame given a field after its sizing (the epoch told by the first msg) is written anew: its bytes carry the field', () => {
  const records = [record(msgId(), medium(1)), record(msgId(), medium(2))];
  const page: InboxPage = { epoch: 'E2', firstSeq: 1, latestSeq: 2, entries: records.map((r, i) => ({ seq: i + 1, id: r.id, kind: 1 as const })) };
  const effects: Effect[] = [];
  deliverPage(untoldConn(), page, records, { window: 10, ackTimeoutMs: 60_000 }, effects, false, 0, { bytes: 1 << 20, byBudget: false });
  const frames = effects.flatMap((e) => (e.kind === 'send' && e.frame.t === 'msg' ? [e.frame] : []));
  assert.equal(frames.length, 2);
  assert.equal(frames[0]?.epoch, 'E2', 'the first msg tells the epoch (given after the page was sized)');
  const out: string[] = [];
  const conn: DeliveryConnection = { id: 'c', device: 'd', close: () => undefined, send: (text) => { out.push(text.toString()); } };
  for (const f of frames) assert.equal(sendFrame(conn, f, createLogger('silent'), 'u'), undefined);
  assert.deepEqual(out, frames.map((f) => JSON.stringify(f)));
});

test('a frame changed, copied or sent again after its sizing is written as JSON.stringify of what it is then; cached data: one build around it', () => {
  const f: MsgFrame = { t: 'msg', seq: 1, id: msgId(), type: 't', ts: 1, data: medium(3) };
  msgFrameSize(f);
  f.redelivered = true;
  assert.equal(msgFrameBytes(f).toString(), JSON.stringify(f), 'a member added');
  msgFrameSize(f);
  f.seq = 2;
  assert.equal(msgFrameBytes(f).toString(), JSON.stringify(f), 'a value changed');
  msgFrameSize(f);
  assert.equal(msgFrameBytes({ ...f, room: 'r' }).toString(), JSON.stringify({ ...f, room: 'r' }), 'a copy');
  assert.equal(msgFrameBytes(f).toString(), JSON.stringify(f), 'the frame itself');
  assert.equal(msgFrameBytes(f).toString(), JSON.stringify(f), 'sent again');
  // Data cached by MsgID (1 KiB or more): its first frame is written whole, each later
  // frame once around the cached bytes, sized and sent.
  const big = { text: 'b'.repeat(5_000) };
  const id = msgId();
  msgFrameBytes({ t: 'msg', seq: 1, id, type: 't', ts: 1, data: big });
  const g: MsgFrame = { t: 'msg', seq: 2, id, type: 't', room: 'r', ts: 1, data: big };
  const before = frameWrites();
  const size = msgFrameSize(g);
  const bytes = msgFrameBytes(g);
  assert.equal(bytes.toString(), JSON.stringify(g));
  assert.equal(size, bytes.length + 4);
  assert.deepEqual(frameWrites(), { whole: before.whole, around: before.around + 1 }, 'built around its data once (twice without the kept bytes)');
});

test('a frame that cannot be serialised still goes out as a gap after its sizing; a RangeError is tried again at the send', () => {
  const cyclic: Record<string, unknown> = { text: 'c'.repeat(600) };
  cyclic.self = cyclic;
  const f: MsgFrame = { t: 'msg', seq: 4, id: msgId(), type: 't', ts: 1, data: cyclic };
  msgFrameSize(f);
  const out: string[] = [];
  const conn: DeliveryConnection = { id: 'c', device: 'd', close: () => undefined, send: (text) => { out.push(text.toString()); } };
  assert.equal(sendFrame(conn, f, createLogger('silent'), 'u'), 4);
  assert.deepEqual(out, ['{"t":"gap","from":4,"to":4,"reason":"undeliverable"}']);
  // Overflows on the sizing's call only (a stack-deep value stood in for; too large for
  // the size bound, so sizing writes it): not kept, the send writes it.
  let calls = 0;
  const deep = { pad: 'p'.repeat(600), toJSON: (): unknown => { if (calls++ === 0) throw new RangeError('Maximum call stack size exceeded'); return medium(4); } };
  const g: MsgFrame = { t: 'msg', seq: 5, id: msgId(), type: 't', ts: 1, data: deep };
  msgFrameSize(g);
  assert.equal(msgFrameBytes(g).toString(), JSON.stringify({ ...g, data: medium(4) }));
  assert.equal(calls, 2, 'written at the sizing (overflowed) and again at the send');
});

test('a frame whose write throws is not counted as written: frameWrites counts the writes that produced bytes (review35 7)', () => {
  const before = frameWrites();
  const f: MsgFrame = { t: 'msg', seq: 6, id: msgId(), type: 't', ts: 1, data: { n: 1n } };
  assert.throws(() => msgFrameBytes(f), TypeError);
  assert.deepEqual(frameWrites(), before, 'a BigInt cannot be serialised: no bytes, no write counted');
  const ok: MsgFrame = { t: 'msg', seq: 7, id: msgId(), type: 't', ts: 1, data: 'fine' };
  msgFrameBytes(ok);
  assert.deepEqual(frameWrites(), { whole: before.whole + 1, around: before.around });
});
