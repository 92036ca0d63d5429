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
  guard.rotated('made', []);

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
  guard.rotated('kept', again);
  assert.deepEqual(again, [{ kind: 'rotate-epoch', epoch: 'ep1', cause: 'delivered' }]);
  const none: Effect[] = [];
  guard.rotated('made', none);
  assert.deepEqual(none, []);

  guard.rotate('ep2', false, [], 'resume');
  guard.rotate('ep2', false, [], 'delivered');
  guard.rotated('made', none); // made (here or by another node): nothing to ask again
  guard.rotate('ep3', false, [], 'resume');
  guard.rotated('kept', none); // refused, no sign this time
  assert.deepEqual(none, []);
  assert.equal(guard.rotating, false);
});

test('a proven rotation whose call failed is owed (no fetch) until retry asks for it again as delivered; a failed resume one is dropped', () => {
  const guard = new EpochGuard();
  guard.rotate('ep1', false, [], 'delivered');
  guard.rotated('failed', []);
  assert.equal(guard.rotating, true, 'owed: the machine starts no fetch');
  const ignored: Effect[] = [];
  guard.rotate('ep1', false, ignored, 'delivered'); // another sign while owed: the retry covers it
  assert.deepEqual(ignored, []);
  const again: Effect[] = [];
  assert.equal(guard.retry(false, again), true);
  assert.deepEqual(again, [{ kind: 'rotate-epoch', epoch: 'ep1', cause: 'delivered' }]);
  assert.equal(guard.retry(false, []), false, 'in flight, not owed');
  guard.rotated('made', []);
  assert.equal(guard.rotating, false);

  guard.rotate('ep2', false, [], 'resume');
  guard.rotated('failed', []);
  assert.equal(guard.rotating, false, 'a claim\'s failed rotation is dropped: the next read shows it again');
  assert.equal(guard.retry(false, []), false);

  // A fetch made stale by the failed rotation stays stale through the retry.
  guard.rotate('ep3', true, [], 'delivered');
  guard.rotated('failed', []);
  guard.retry(false, []);
  assert.equal(guard.fetchEnded(), true);
});
