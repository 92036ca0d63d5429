import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeMsgId, decodeMsgId, tryDecodeMsgId, msgIdToBytes, msgIdFromBytes, MAX_COUNTER, MsgKind, type MsgIdParts } from '../../src/ids/msg-id.js';
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
