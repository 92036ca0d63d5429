/**
 * EpochGuard (src/delivery/epoch-guard.ts): one rotation in flight at a time, and the
 * cause its effect gives the log.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EpochGuard } from '../../src/delivery/epoch-guard.js';
import type { Effect } from '../../src/delivery/effects.js';

test('one rotate-epoch per rotation; a later sign of the node\'s own deliveries in the same pass makes its cause delivered, never the other way', () => {
  const guard = new EpochGuard();
  const effects: Effect[] = [];
  guard.rotate('ep1', false, effects, 'resume');
  guard.rotate('ep1', false, effects, 'delivered');
  assert.deepEqual(effects, [{ kind: 'rotate-epoch', epoch: 'ep1', cause: 'delivered' }]);
  guard.rotated(false, []);

  const next: Effect[] = [];
  guard.rotate('ep2', false, next, 'delivered');
  guard.rotate('ep2', false, next, 'resume');
  assert.deepEqual(next, [{ kind: 'rotate-epoch', epoch: 'ep2', cause: 'delivered' }]);
  assert.equal(guard.rotating, true);
});

test('a sign of the node\'s own deliveries during a rotation that Redis refuses (cool-down) asks again, as delivered; one whose rotation was made does not', () => {
  const guard = new EpochGuard();
  guard.rotate('ep1', false, [], 'resume');
  guard.rotate('ep1', false, [], 'delivered'); // a later pass, while the resume one is in flight
  const again: Effect[] = [];
  guard.rotated(true, again);
  assert.deepEqual(again, [{ kind: 'rotate-epoch', epoch: 'ep1', cause: 'delivered' }]);
  const none: Effect[] = [];
  guard.rotated(false, none);
  assert.deepEqual(none, []);

  guard.rotate('ep2', false, [], 'resume');
  guard.rotate('ep2', false, [], 'delivered');
  guard.rotated(false, none); // made (here or by another node): nothing to ask again
  guard.rotate('ep3', false, [], 'resume');
  guard.rotated(true, none); // refused, no sign this time
  assert.deepEqual(none, []);
  assert.equal(guard.rotating, false);
});
