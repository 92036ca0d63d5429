import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeMsgId, decodeMsgId, tryDecodeMsgId, msgIdToBytes, msgIdFromBytes, isMsgKind, MAX_COUNTER, MSG_ID_PATTERN, MsgKind, type MsgIdParts } from '../../src/ids/msg-id.js';
import { isPixiuError } from '../../src/errors.js';

test('a MsgID round-trips through its 16 hex digits and its 8 bytes', () => {
  for (const parts of [
    { partition: 0, kind: MsgKind.user, counter: 1 },
    { partition: 255, kind: MsgKind.channel, counter: MAX_COUNTER },
    { partition: 7, kind: MsgKind.room, counter: 123_456_789 },
  ]) {
    const id = encodeMsgId(parts);
    assert.match(id, /^[0-9a-f]{16}$/);
    assert.deepEqual(decodeMsgId(id), parts);
    assert.equal(msgIdFromBytes(msgIdToBytes(id)), id);
  }
  assert.equal(encodeMsgId({ partition: 1, kind: MsgKind.user, counter: 2 }), '0101000000000002');
});

test('byte order of MsgIDs is counter order within a partition and kind', () => {
  const a = msgIdToBytes(encodeMsgId({ partition: 3, kind: 1, counter: 255 }));
  const b = msgIdToBytes(encodeMsgId({ partition: 3, kind: 1, counter: 256 }));
  assert.equal(Buffer.compare(a, b), -1);
});

test('foreign input that is not a MsgID is INVALID_REQUEST', () => {
  for (const bad of ['', 'zz01000000000001', '0105000000000001', '0100000000000001', '0101000000000000',
    '0101000000000001 ', '0101000000000000001', 'ABCDEF0123456789', 42, null, undefined, {}]) {
    assert.throws(() => decodeMsgId(bad), (err) => isPixiuError(err, 'INVALID_REQUEST'), String(bad));
  }
  assert.equal(tryDecodeMsgId('0100000000000001'), undefined);
  // Upper-case digits are refused even where they would decode: one message, one id string.
  assert.equal(tryDecodeMsgId('010100000000000A'), undefined);
  assert.equal(tryDecodeMsgId('010100000000000a')?.counter, 10);
});

test('the error for a long non-id quotes at most its first 40 characters', () => {
  const long = `${'0'.repeat(40)}${'z'.repeat(60)}`;
  assert.throws(() => decodeMsgId(long), (err) => {
    assert.ok(isPixiuError(err, 'INVALID_REQUEST'));
    assert.ok(err.message.includes(`"${'0'.repeat(40)}"`) && !err.message.includes('z'), err.message);
    return true;
  });
});

test('encoding out-of-range parts is a programming error', () => {
  assert.throws(() => encodeMsgId({ partition: 256, kind: 1, counter: 1 }), RangeError);
  assert.throws(() => encodeMsgId({ partition: 0, kind: 1, counter: MAX_COUNTER + 1 }), RangeError);
  assert.throws(() => encodeMsgId({ partition: 0, kind: 1, counter: 0 }), RangeError);
  for (const parts of [
    { partition: -1, kind: 1, counter: 1 },
    { partition: 1.5, kind: 1, counter: 1 },
    { partition: 0, kind: 0, counter: 1 },
    { partition: 0, kind: 5, counter: 1 },
    { partition: 0, kind: 1, counter: 1.5 },
  ]) {
    assert.throws(() => encodeMsgId(parts as MsgIdParts), RangeError, JSON.stringify(parts));
  }
});

test('a kind is exactly one of the four numbers, wherever it is read from', () => {
  for (const kind of Object.values(MsgKind)) assert.equal(isMsgKind(kind), true, String(kind));
  for (const other of [0, 5, 1.5, Number.NaN, '1', null, undefined]) assert.equal(isMsgKind(other), false, String(other));
});

test('the MsgID pattern the OpenAPI document publishes takes exactly the ids the server decodes', () => {
  const pattern = new RegExp(MSG_ID_PATTERN);
  // Portable: no lookaround, no escapes an engine could read another way (RE2 has no lookahead).
  assert.doesNotMatch(MSG_ID_PATTERN, /\(\?[=!<]|\\/);
  const samples = ['ffffffffffffffff', '0005000000000001', '0001000000000000', '0000000000000001', '0101000000000000', '0101000000000001',
    '0104ffffffffffff', 'ff04000000000001', '0103100000000000', '0102000000000010', '0105000000000001', '0110000000000001', '0101ABCDEF000001',
    '010100000000001', '01010000000000001', '0x01000000000001', ''];
  // A single digit other than 0 at each place of the counter, every kind byte 00–06 and ff.
  for (let at = 0; at < 12; at++) samples.push(`0101${'0'.repeat(at)}${'1'}${'0'.repeat(11 - at)}`, `7f03${'0'.repeat(at)}f${'0'.repeat(11 - at)}`);
  for (const kind of ['00', '01', '02', '03', '04', '05', '06', '0f', '10', 'ff']) samples.push(`00${kind}000000000abc`);
  for (let i = 0; i < 2000; i++) {
    samples.push(Array.from({ length: 16 }, () => '0123456789abcdef'[Math.floor(Math.random() * 16)]).join(''));
    samples.push(encodeMsgId({ partition: Math.floor(Math.random() * 256), kind: (1 + Math.floor(Math.random() * 4)) as MsgIdParts['kind'], counter: 1 + Math.floor(Math.random() * MAX_COUNTER) }));
  }
  for (const id of samples) assert.equal(pattern.test(id), tryDecodeMsgId(id) !== undefined, id);
});
