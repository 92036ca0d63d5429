/**
 * The size a page is cut by (src/delivery/msg-frame-bytes.ts `msgFrameSize`,
 * connection-state.ts `deliverPage`): near the bytes `msgFrameBytes` writes, from a
 * bound for small `data`, the cache for one encoded before, and an encoding (then
 * cached, and not done again at the send) for a large one seen first.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { MsgFrame } from '../../src/delivery/frames.js';
import { encodedDataCacheStats, msgFrameBytes, msgFrameSize } from '../../src/delivery/msg-frame-bytes.js';

let n = 0;
/** A frame of a new MsgID (nothing cached for it). */
function frame(data: unknown, extra: Partial<MsgFrame> = {}): MsgFrame {
  return { t: 'msg', seq: 7, id: `f${String(++n).padStart(15, '0')}`, type: 'chat.text', from: 'ana', ts: 1_700_000_000_000, data, ...extra };
}

test('a small frame is sized from a bound without encoding: at least its bytes, and within a few hundred of them', () => {
  for (const data of [null, 42, 'hi', { text: 'hello there', n: 3, ok: true }, ['a', 1, { b: [2, 3] }], { text: 'é'.repeat(100) }]) {
    const f = frame(data, { room: 'r1', redelivered: true });
    const before = encodedDataCacheStats().entries;
    const size = msgFrameSize(f);
    assert.equal(encodedDataCacheStats().entries, before, 'nothing encoded nor cached');
    const real = msgFrameBytes(f).length;
    assert.ok(size >= real && size <= real + 600, `${JSON.stringify(data)}: sized ${size}, written ${real}`);
  }
});

test('a large frame is sized exactly, with its WebSocket header: encoded once when first seen (its data cached for the send), from the cache after', () => {
  const f = frame({ pad: 'x'.repeat(60_000) });
  const first = msgFrameSize(f);
  // Cached by the sizing: a frame of the same MsgID is written from the cache, whatever
  // value it holds (a message's data never changes: msg-frame-bytes.ts).
  assert.equal(msgFrameBytes({ ...f, data: { other: true } }).length, msgFrameBytes(f).length, 'its data is cached by the sizing');
  assert.equal(first, msgFrameBytes(f).length + 4, 'the first sizing encodes it');
  const other = { ...f, seq: 8, room: 'r2' };
  assert.equal(msgFrameSize(other), msgFrameBytes(other).length + 4, 'from the cache');
  const huge = frame({ pad: 'z'.repeat(70_000) });
  assert.equal(msgFrameSize(huge), msgFrameBytes(huge).length + 10);
  // Many small values: past the bound's reach, encoded.
  const wide = frame(Array.from({ length: 500 }, (_, i) => i));
  assert.equal(msgFrameSize(wide), msgFrameBytes(wide).length + 4);
});

test('a frame whose data cannot be serialised is sized as its small fields, and never throws', () => {
  const cyclic: Record<string, unknown> = { pad: 'y'.repeat(2000) };
  cyclic.self = cyclic;
  const f = frame(cyclic);
  const size = msgFrameSize(f);
  assert.ok(size > 0 && size < 400, `sized ${size}`);
  assert.throws(() => msgFrameBytes(f), TypeError);
  assert.ok(msgFrameSize(f) < 400, 'again, from the cached failure');
});
