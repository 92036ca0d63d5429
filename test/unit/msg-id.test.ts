import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeMsgId, decodeMsgId, tryDecodeMsgId, msgIdToBytes, msgIdFromBytes, MAX_COUNTER, MsgKind } from '../../src/ids/msg-id.js';
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
});

test('encoding out-of-range parts is a programming error', () => {
  assert.throws(() => encodeMsgId({ partition: 256, kind: 1, counter: 1 }), RangeError);
  assert.throws(() => encodeMsgId({ partition: 0, kind: 1, counter: MAX_COUNTER + 1 }), RangeError);
  assert.throws(() => encodeMsgId({ partition: 0, kind: 1, counter: 0 }), RangeError);
});
