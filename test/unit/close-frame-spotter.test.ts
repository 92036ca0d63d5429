/**
 * The walk of client frame headers that spots a close frame among bytes dropped
 * unparsed after a 4003 (src/gateway/close-frame-spotter.ts, RFC 6455 §5.2): headers
 * cut across chunks anywhere, 2- and 8-byte extended lengths, masked and unmasked
 * frames; a payload's bytes are skipped, never read as a header.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CloseFrameSpotter } from '../../src/gateway/close-frame-spotter.js';

/** One frame (RFC 6455 §5.2): FIN set, `opcode`, masked with `mask` when given (payload masked as §5.3 says). */
function frame(opcode: number, payload: Uint8Array, mask?: readonly [number, number, number, number]): Buffer {
  const n = payload.length;
  const maskBit = mask === undefined ? 0 : 0x80;
  let head: Buffer;
  if (n < 126) head = Buffer.from([0x80 | opcode, maskBit | n]);
  else if (n < 65536) {
    head = Buffer.from([0x80 | opcode, maskBit | 126, 0, 0]);
    head.writeUInt16BE(n, 2);
  } else {
    head = Buffer.alloc(10);
    head[0] = 0x80 | opcode;
    head[1] = maskBit | 127;
    head.writeBigUInt64BE(BigInt(n), 2);
  }
  if (mask === undefined) return Buffer.concat([head, payload]);
  const body = Buffer.from(payload.map((b, i) => b ^ (mask[i % 4] as number)));
  return Buffer.concat([head, Buffer.from(mask), body]);
}

/** A close frame's payload: the code, then the reason (RFC 6455 §5.5.1). */
function closePayload(code: number, reason = ''): Buffer {
  const p = Buffer.alloc(2 + Buffer.byteLength(reason));
  p.writeUInt16BE(code, 0);
  p.write(reason, 2);
  return p;
}

const MASK = [0x37, 0xfa, 0x21, 0x3d] as const;
/** A masked close frame's header and key, sent as a payload: bytes that look like a close header. */
const LOOKS_LIKE_CLOSE = frame(0x8, closePayload(4003, 'x'), [0, 0, 0, 0]);

/** Pushes `chunks` in order; the index of the chunk after which the spotter first said true, or -1. */
function spottedAt(spotter: CloseFrameSpotter, chunks: readonly Buffer[]): number {
  for (let i = 0; i < chunks.length; i++) if (spotter.push(chunks[i] as Buffer)) return i;
  return -1;
}

/** Checks that `before` then a close frame, split in two at every byte boundary, spots the close at its last byte and not before. */
function checkEverySplit(before: Buffer, close: Buffer): void {
  const all = Buffer.concat([before, close]);
  for (let cut = 0; cut <= all.length; cut++) {
    const spotter = new CloseFrameSpotter();
    const first = spotter.push(all.subarray(0, cut));
    assert.equal(first, cut === all.length, `cut at ${cut} of ${all.length}: spotted only once the close frame is whole`);
    assert.equal(spotter.push(all.subarray(cut)), true, `cut at ${cut}: spotted at the end`);
    assert.equal(spotter.spotted, true);
  }
}

test('a close frame after several data frames is spotted once its last byte has arrived, however the bytes are cut in two', () => {
  const before = Buffer.concat([
    frame(0x1, Buffer.from('{"t":"ack","seq":0}'), MASK),
    frame(0xa, Buffer.alloc(0), [0, 0, 0, 0]),
    frame(0x9, Buffer.from('ping'), MASK),
    frame(0x2, Buffer.alloc(125, 7), MASK),
    frame(0x1, Buffer.from('unmasked')),
  ]);
  checkEverySplit(before, frame(0x8, closePayload(4003, 'protocol abuse'), MASK));
});

test('byte by byte: nothing is spotted before the close frame\'s last byte', () => {
  const before = Buffer.concat([frame(0x1, Buffer.from('a'), MASK), frame(0x1, Buffer.alloc(300, 1), MASK)]);
  const close = frame(0x8, closePayload(1000), MASK);
  const all = Buffer.concat([before, close]);
  const spotter = new CloseFrameSpotter();
  const bytes = Array.from(all, (b) => Buffer.from([b]));
  assert.equal(spottedAt(spotter, bytes), all.length - 1);
});

test('an empty close frame (no code) is spotted at the end of its header, mask included', () => {
  checkEverySplit(Buffer.alloc(0), frame(0x8, Buffer.alloc(0), MASK));
  checkEverySplit(Buffer.alloc(0), frame(0x8, Buffer.alloc(0)));
});

test('126: a 2-byte extended length is read and its payload skipped, also when the length is cut', () => {
  // 0x88 0x80 in the payload: a close header, were the length misread.
  const payload = Buffer.concat(Array.from({ length: 40 }, () => LOOKS_LIKE_CLOSE));
  assert.ok(payload.length >= 126 && payload.length < 65536);
  checkEverySplit(frame(0x1, payload, MASK), frame(0x8, closePayload(4003), MASK));
  checkEverySplit(frame(0x2, payload), frame(0x8, closePayload(4003), MASK));
});

test('127: an 8-byte extended length is read and its payload skipped, also when the length is cut', () => {
  const payload = Buffer.concat(Array.from({ length: 10_000 }, () => LOOKS_LIKE_CLOSE));
  assert.ok(payload.length >= 65536);
  const data = frame(0x2, payload, MASK);
  const close = frame(0x8, closePayload(4003), MASK);
  // Every cut within the headers, and some within the payload.
  const all = Buffer.concat([data, close]);
  const cuts = [...Array.from({ length: 20 }, (_, i) => i), 1000, data.length - 1, data.length, ...Array.from({ length: close.length }, (_, i) => data.length + i + 1)];
  for (const cut of cuts) {
    const spotter = new CloseFrameSpotter();
    assert.equal(spotter.push(all.subarray(0, cut)), cut === all.length, `cut at ${cut}`);
    assert.equal(spotter.push(all.subarray(cut)), true, `cut at ${cut}: spotted at the end`);
  }
});

test('a payload made of close frames is never taken for one, whole or cut at every byte', () => {
  const payload = Buffer.concat(Array.from({ length: 3 }, () => LOOKS_LIKE_CLOSE));
  const bytes = Buffer.concat([frame(0x1, payload, [0, 0, 0, 0]), frame(0x2, payload), frame(0x1, payload, MASK)]);
  for (let cut = 0; cut <= bytes.length; cut++) {
    const spotter = new CloseFrameSpotter();
    spotter.push(bytes.subarray(0, cut));
    spotter.push(bytes.subarray(cut));
    assert.equal(spotter.spotted, false, `cut at ${cut}`);
  }
  const one = new CloseFrameSpotter();
  assert.equal(spottedAt(one, Array.from(bytes, (b) => Buffer.from([b]))), -1);
});

test('started inside a frame (midFrame), the rest of its payload is skipped: a close-looking rest is not a close, a close frame\'s rest is', () => {
  const data = frame(0x1, LOOKS_LIKE_CLOSE, [0, 0, 0, 0]);
  const close = frame(0x8, closePayload(4003), MASK);
  // The receiver read the data frame's 6 header bytes and 3 of its payload.
  const rest = data.subarray(9);
  const spotter = CloseFrameSpotter.midFrame(0x1, rest.length);
  assert.equal(spotter.push(rest), false);
  assert.equal(spotter.push(close), true);
  // Inside a close frame: spotted once its last byte arrives.
  const inClose = CloseFrameSpotter.midFrame(0x8, 3);
  assert.equal(inClose.push(Buffer.from([1, 2])), false);
  assert.equal(inClose.push(Buffer.from([3])), true);
  assert.equal(CloseFrameSpotter.midFrame(0x8, 0).spotted, true);
  assert.equal(CloseFrameSpotter.midFrame(0x1, 0).push(close), true);
});

test('after the close frame it stays spotted, whatever follows', () => {
  const spotter = new CloseFrameSpotter();
  assert.equal(spotter.push(Buffer.concat([frame(0x8, Buffer.alloc(0), MASK), Buffer.from([0x81, 0xff])])), true);
  assert.equal(spotter.push(Buffer.from('anything')), true);
});
