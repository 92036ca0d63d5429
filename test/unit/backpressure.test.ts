/**
 * The backpressure decisions of one socket (src/gateway/backpressure.ts, DESIGN.md §5
 * "Backpressure"): a write pauses delivery when it takes the queued bytes past the
 * high-water mark, closes the connection (4009) past the hard cap, and a pause ends only
 * once the queue has drained below half the high-water mark — not as soon as it dips
 * under the mark, which would pause and resume the connection on every other frame.
 * The functions are pure; the end-to-end behaviour on real sockets is
 * test/gateway/backpressure.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { afterWrite, drained, wakeAll } from '../../src/gateway/backpressure.js';

const LIMITS = { socketHighWaterBytes: 1000, socketHardCapBytes: 8000 };

test('afterWrite: pause only when the write crosses the high-water mark, once; close past the hard cap, paused or not', () => {
  assert.equal(afterWrite(0, false, LIMITS), 'ok');
  assert.equal(afterWrite(1000, false, LIMITS), 'ok', 'at the mark is not past it');
  assert.equal(afterWrite(1001, false, LIMITS), 'pause');
  assert.equal(afterWrite(5000, true, LIMITS), 'ok', 'already paused: no second pause (its timer would be armed again)');
  assert.equal(afterWrite(8000, true, LIMITS), 'ok', 'at the hard cap is not past it');
  assert.equal(afterWrite(8001, true, LIMITS), 'close');
  assert.equal(afterWrite(8001, false, LIMITS), 'close', 'one write past the hard cap closes even before any pause');
});

test('drained: a pause ends only below half the high-water mark (hysteresis), and only a pause ends', () => {
  assert.equal(drained(999, true, LIMITS), false, 'just under the mark: still paused');
  assert.equal(drained(500, true, LIMITS), false, 'at half the mark: still paused');
  assert.equal(drained(499, true, LIMITS), true);
  assert.equal(drained(0, true, LIMITS), true);
  assert.equal(drained(0, false, LIMITS), false, 'not paused: nothing to resume');
});

test('wakeAll calls every waiter once, and accepts none', () => {
  const woken: number[] = [];
  wakeAll([() => woken.push(1), () => woken.push(2)]);
  assert.deepEqual(woken, [1, 2]);
  wakeAll(undefined);
  wakeAll([]);
  assert.deepEqual(woken, [1, 2]);
});
