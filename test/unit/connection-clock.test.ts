/**
 * ConnectionClock (src/gateway/connection-clock.ts): one interval visits every
 * connection; a connection taken off it is visited no more; the tick is a quarter
 * second (finer only for heartbeats under half a second); and a new connection's
 * first heartbeat falls at 50–100 % of the period, never sooner, never later. Node's
 * mock timers (setInterval and Date) drive the clock.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConnectionClock, firstHeartbeatAt, type Ticking } from '../../src/gateway/connection-clock.js';

/** Moves the mock clock on by whole ticks, one at a time (one `tick(n)` fires every due callback with `Date.now()` already at its end). */
function ticks(t: import('node:test').TestContext, n: number, ms = 250): void {
  for (let i = 0; i < n; i++) t.mock.timers.tick(ms);
}

/** A member that records the times it was visited at. */
function member(): Ticking & { seen: number[] } {
  const seen: number[] = [];
  return { seen, tick: (nowMs) => { seen.push(nowMs); } };
}

test('the clock visits each member every tick, and a deleted member no more', (t) => {
  t.mock.timers.enable({ apis: ['setInterval', 'Date'], now: 1_000_000 });
  const clock = new ConnectionClock(250);
  const a = member();
  const b = member();
  clock.add(a);
  clock.add(b);
  t.mock.timers.tick(249);
  assert.deepEqual(a.seen, [], 'not before the first tick');
  t.mock.timers.tick(1);
  assert.deepEqual(a.seen, [1_000_250]);
  assert.deepEqual(b.seen, [1_000_250]);
  clock.delete(a);
  ticks(t, 2);
  assert.deepEqual(a.seen, [1_000_250], 'a deleted member is not visited again');
  assert.deepEqual(b.seen, [1_000_250, 1_000_500, 1_000_750], 'the others still are, every tick');
  clock.delete(b);
  ticks(t, 4);
  assert.deepEqual(b.seen, [1_000_250, 1_000_500, 1_000_750]);
  // Ticking again once a member is added anew, from that moment.
  clock.add(a);
  t.mock.timers.tick(250);
  assert.deepEqual(a.seen, [1_000_250, 1_002_000]);
  clock.stop();
});

test('the tick is a quarter second, half the heartbeat below half a second, never under 10 ms', () => {
  assert.equal(ConnectionClock.tickFor(30_000), 250);
  assert.equal(ConnectionClock.tickFor(500), 250);
  assert.equal(ConnectionClock.tickFor(499), 249);
  assert.equal(ConnectionClock.tickFor(200), 100);
  assert.equal(ConnectionClock.tickFor(25), 12);
  assert.equal(ConnectionClock.tickFor(5), 10);
});

test('the first heartbeat falls at 50–100 % of the period, spread over it', (t) => {
  const period = 30_000;
  const now = 5_000_000;
  const random = t.mock.method(Math, 'random', () => 0);
  assert.equal(firstHeartbeatAt(now, period), now + period / 2, 'the earliest: half the period');
  random.mock.mockImplementation(() => 0.5);
  assert.equal(firstHeartbeatAt(now, period), now + 0.75 * period);
  random.mock.mockImplementation(() => 1 - Number.EPSILON);
  assert.equal(firstHeartbeatAt(now, period), now + period, 'the latest: the whole period');
  random.mock.restore();
  const offsets = new Set<number>();
  for (let i = 0; i < 200; i++) {
    const off = firstHeartbeatAt(now, period) - now;
    assert.ok(off >= period / 2 && off <= period, `${off} is within 50–100 % of ${period}`);
    offsets.add(off);
  }
  assert.ok(offsets.size > 50, `spread, not one instant (${offsets.size} distinct of 200)`);
});
