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
  guard.rotated();

  const next: Effect[] = [];
  guard.rotate('ep2', false, next, 'delivered');
  guard.rotate('ep2', false, next, 'resume');
  assert.deepEqual(next, [{ kind: 'rotate-epoch', epoch: 'ep2', cause: 'delivered' }]);
  assert.equal(guard.rotating, true);
});
