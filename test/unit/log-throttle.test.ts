/**
 * LogThrottle (src/log-throttle.ts): the first line of an outage is logged, then at most
 * one per interval, carrying how many were left out since.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EVERY_LINE, LogThrottle, thinnedFields } from '../../src/log-throttle.js';

test('the first line is logged, repeats within the interval are counted, the next one after it says how many', () => {
  const throttle = new LogThrottle(10_000);
  assert.equal(throttle.take(1_000), 0);
  assert.equal(throttle.take(1_001), undefined);
  assert.equal(throttle.take(5_000), undefined);
  assert.equal(throttle.take(10_999), undefined);
  assert.equal(throttle.take(11_000), 3);
  assert.equal(throttle.take(11_001), undefined);
  // A quiet spell: the next one is logged at once, with nothing left out.
  assert.equal(throttle.take(60_000), 1);
  assert.equal(throttle.take(80_000), 0);
});

test('thinnedFields names the lines left out only when there were some', () => {
  assert.deepEqual(thinnedFields(0), {});
  assert.deepEqual(thinnedFields(7), { notLogged: 7 });
});

test('EVERY_LINE thins nothing, within the same millisecond too, and whatever time its other callers gave it', () => {
  // Another caller in the process took a line now (stall-log, ack-cursors, rotation-logs share it).
  assert.equal(EVERY_LINE.take(), 0);
  for (let i = 0; i < 5; i++) assert.equal(EVERY_LINE.take(1_000), 0);
});

test('an interval of 0 thins nothing when the clock is set back', () => {
  const throttle = new LogThrottle(0);
  assert.equal(throttle.take(2_000), 0);
  assert.equal(throttle.take(1_000), 0);
  assert.equal(throttle.take(1_000), 0);
});

test('a clock set back does not silence the line for the size of the step: a line before the last one logged is logged', () => {
  const throttle = new LogThrottle(10_000);
  const hour = 3_600_000;
  assert.equal(throttle.take(hour + 1_000), 0);
  assert.equal(throttle.take(hour + 2_000), undefined);
  // The wall clock stepped back an hour: logged, with what was left out.
  assert.equal(throttle.take(2_000), 1);
  assert.equal(throttle.take(3_000), undefined, 'thinned again from there');
  assert.equal(throttle.take(12_000), 1);
});
