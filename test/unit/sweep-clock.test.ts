import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SweepClock } from '../../src/store/sweep-clock.js';

/** A wall clock and a monotonic clock the test moves by hand. */
function clocks(): { wall: number; mono: number; sweep: SweepClock } {
  const c = { wall: 1_000_000, mono: 50, sweep: undefined as unknown as SweepClock };
  c.sweep = new SweepClock(() => c.wall, () => c.mono);
  return c;
}

test('the cutoff follows the wall clock while it moves with the monotonic clock', () => {
  const c = clocks();
  c.wall += 500;
  c.mono += 500;
  assert.equal(c.sweep.cutoff(), 1_000_500);
  c.wall += 1;
  c.mono += 10;
  assert.equal(c.sweep.cutoff(), 1_000_501, 'a wall clock running slow is taken as it is');
});

test('a forward step is not taken; the cutoff moves on by monotonic time and lags by the step', () => {
  const c = clocks();
  c.wall += 10_000;
  c.mono += 100;
  assert.equal(c.sweep.cutoff(), 1_000_100);
  c.wall += 200;
  c.mono += 200;
  assert.equal(c.sweep.cutoff(), 1_000_300);
});

test('a backward step lowers the cutoff at once, and a step forward back to the truth is not taken', () => {
  const c = clocks();
  c.wall -= 5000;
  c.mono += 10;
  assert.equal(c.sweep.cutoff(), 995_000);
  c.wall += 5000;
  c.mono += 10;
  assert.equal(c.sweep.cutoff(), 995_010);
});

test('the bound starts at construction: a step before the first sweep is not taken either', () => {
  const c = clocks();
  c.wall += 7_200_000;
  c.mono += 1000;
  assert.equal(c.sweep.cutoff(), 1_001_000);
});

test('given Redis\'s clock, the cutoff waits for it (0 until known) and never runs more than a second past it', () => {
  const c = { wall: 1_000_000 + 7_200_000, mono: 0, redis: undefined as number | undefined };
  const sweep = new SweepClock(() => c.wall, () => c.mono, () => c.redis);
  assert.equal(sweep.cutoff(), 0, 'not known yet: nothing is cut');
  c.redis = 1_000_000;
  assert.equal(sweep.cutoff(), 1_001_000, 'a clock two hours ahead is cut to Redis\'s plus a second');
  c.wall += 500;
  c.mono += 500;
  c.redis += 500;
  assert.equal(sweep.cutoff(), 1_001_500);
  c.wall = c.redis - 3000;
  assert.equal(sweep.cutoff(), c.redis - 3000, 'a clock behind Redis\'s is taken as it is');
});

test('liveNow is the wall clock, never more than a second past Redis\'s clock once known (review-clock R1)', () => {
  const c = { wall: 1_000_000 + 7_200_000, redis: undefined as number | undefined };
  const sweep = new SweepClock(() => c.wall, () => 0, () => c.redis);
  assert.equal(sweep.liveNow(), c.wall, 'Redis\'s clock not known: the wall clock');
  c.redis = 1_000_000;
  assert.equal(sweep.liveNow(), 1_001_000, 'two hours ahead: Redis\'s plus a second');
  c.wall = c.redis - 3000;
  assert.equal(sweep.liveNow(), c.wall, 'behind Redis\'s: the wall clock');
  assert.equal(new SweepClock(() => 5, () => 0).liveNow(), 5, 'no Redis clock given: the wall clock');
});

test('a dip of Redis\'s clock bounds the cutoffs only while it lasts: once corrected, the cutoff is the wall clock again (review-clock R2)', () => {
  const day = 86_400_000;
  const c = { wall: 1_000_000_000, mono: 0, redis: 1_000_000_000 as number | undefined };
  const sweep = new SweepClock(() => c.wall, () => c.mono, () => c.redis);
  assert.equal(sweep.cutoff(), c.wall);
  c.wall += 5000;
  c.mono += 5000;
  c.redis = c.wall - day;
  assert.equal(sweep.cutoff(), c.wall - day + 1000, 'Redis a day behind: a second past it');
  c.wall += 5000;
  c.mono += 5000;
  c.redis = c.wall;
  assert.equal(sweep.cutoff(), c.wall, 'Redis corrected: the wall clock, no lag left');
  c.wall += 3_600_000;
  c.mono += 3_600_000;
  c.redis = c.wall;
  assert.equal(sweep.cutoff(), c.wall, 'an hour later too');
});
