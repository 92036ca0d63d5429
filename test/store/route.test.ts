import { test } from 'node:test';
import assert from 'node:assert/strict';
import { choosePartition, fnv1a32 } from '../../src/store/route.js';

test('the partition hash is FNV-1a 32 (a stable on-disk contract) and routes by client_msg_id first', () => {
  assert.equal(fnv1a32(''), 0x811c9dc5);
  assert.equal(fnv1a32('a'), 0xe40c292c);
  assert.equal(fnv1a32('foobar'), 0xbf9cf968);
  const p = (m: Parameters<typeof choosePartition>[0]): number => choosePartition(m, 8);
  assert.equal(p({ kind: 1, type: 't', data: 1, to: ['x'], clientMsgId: 'foobar' }), 0xbf9cf968 % 8);
  assert.equal(p({ kind: 1, type: 't', data: 1, to: ['foobar', 'a'] }), 0xbf9cf968 % 8);
  assert.equal(p({ kind: 2, type: 't', data: 1, room: 'a' }), 0xe40c292c % 8);
  for (let i = 0; i < 50; i++) {
    const r = p({ kind: 3, type: 't', data: 1 });
    assert.ok(Number.isInteger(r) && r >= 0 && r < 8);
  }
});
