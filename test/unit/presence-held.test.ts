/**
 * HeldConns (src/cluster/presence-held.ts): the connections a node holds, by user,
 * which presence compares its own entries with. One connection is kept as its id, more
 * as a set; what it answers must not depend on which.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HeldConns } from '../../src/cluster/presence-held.js';

test('held connections are answered the same whether a user has one or several, through holds and releases in any order', () => {
  const held = new HeldConns();
  assert.deepEqual(held.of('ann'), []);
  assert.equal(held.has('ann', 'c1'), false);

  held.hold('ann', 'c1');
  held.hold('ann', 'c1'); // held twice: still one
  assert.deepEqual(held.of('ann'), ['c1']);
  assert.equal(held.has('ann', 'c1'), true);
  assert.equal(held.has('ann', 'c2'), false);
  assert.equal(held.has('bob', 'c1'), false, 'another user holds nothing of ann');

  held.hold('ann', 'c2');
  held.hold('ann', 'c3');
  assert.deepEqual(held.of('ann').sort(), ['c1', 'c2', 'c3']);
  held.release('ann', 'c9'); // unknown: ignored
  held.release('ann', 'c1');
  assert.deepEqual(held.of('ann').sort(), ['c2', 'c3']);
  held.release('ann', 'c3');
  assert.deepEqual(held.of('ann'), ['c2']);
  assert.equal(held.has('ann', 'c2'), true);
  assert.equal(held.has('ann', 'c3'), false);

  held.hold('ann', 'c4'); // from one back to several
  assert.deepEqual(held.of('ann').sort(), ['c2', 'c4']);
  held.release('ann', 'c2');
  held.release('ann', 'c4');
  assert.deepEqual(held.of('ann'), []);
  assert.equal(held.has('ann', 'c4'), false);

  held.release('bob', 'c1'); // a user never held: ignored
  held.hold('bob', 'b1');
  held.release('bob', 'other');
  assert.deepEqual(held.of('bob'), ['b1'], 'releasing another id keeps the one held');
});
