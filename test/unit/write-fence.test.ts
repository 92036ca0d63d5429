/**
 * The store's write fence (src/store/write-fence.ts) says why writes are suspended: in
 * Redis's words when Redis refused the last renewals (test/cluster/full-redis-fence.test.ts
 * end to end), else that the lease was not confirmed in time. A renewal that confirms
 * the lease forgets the refusal: a later lapse with Redis silent (a pause, a hung link)
 * is not answered with an out-of-memory Redis that has long been fixed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WriteFence } from '../../src/store/write-fence.js';

const NOT_CONFIRMED = /^message store writes are suspended: this node's store lease has not been confirmed in time \(Redis did not answer its renewals, or this process was paused\)/;

test('the fence names Redis\'s refusal of the renewals; a confirmed renewal forgets it, so a later lapse says the lease was not confirmed in time', () => {
  let now = 0;
  const fence = new WriteFence(() => now);
  assert.equal(fence.refusal(), undefined, 'no deadline before the first confirmation');
  fence.confirm(100);
  now = 99;
  assert.equal(fence.refusal(), undefined);
  fence.renewalFailed('Redis refuses writes: it is out of memory (maxmemory)');
  now = 100;
  assert.match(fence.refusal()?.message ?? '', /^message store writes are suspended: Redis refuses writes: it is out of memory \(maxmemory\), so this node's store lease could not be renewed in time/);
  assert.equal(fence.refusal()?.code, 'UNAVAILABLE');
  fence.confirm(200);
  assert.equal(fence.refusal(), undefined, 'writes resume once a renewal confirms the lease');
  now = 250;
  assert.match(fence.refusal()?.message ?? '', NOT_CONFIRMED);
  fence.renewalFailed(undefined);
  assert.match(fence.refusal()?.message ?? '', NOT_CONFIRMED, 'a renewal that failed without Redis refusing it says the same');
});
