/**
 * The backpressure decisions of one socket (src/gateway/backpressure.ts, DESIGN.md §5
 * "Backpressure"): a write pauses delivery when it takes the queued bytes past the
 * high-water mark, closes the connection (4009) past the hard cap, and a pause ends only
 * once the queue has drained below half the high-water mark — not as soon as it dips
 * under the mark, which would pause and resume the connection on every other frame.
 * A pause's clock runs while the queue drains nothing, not while it is paused. The
 * functions are pure (a Pause keeps its clock and waiters); the end-to-end behaviour on
 * real sockets is test/gateway/backpressure.test.ts and slow-reader.test.ts.
 */
import { mock, test } from 'node:test';
import assert from 'node:assert/strict';
import { afterWrite, drained, drainedSince, Pause, type DrainMark, pageAllowance } from '../../src/gateway/backpressure.js';

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

/**
 * Advances the mocked clock 1 ms at a time: Node 20's mock runs a timer armed by a
 * callback only on a later tick, so a Pause's checks (each arming the next) need steps.
 */
function advance(ms: number): void {
  for (let i = 0; i < ms; i++) mock.timers.tick(1);
}

/** A queue that never drains: the same mark at every check. */
const STILL = (): DrainMark => ({ doneBytes: 0, leftBytes: 5000 });

test('drainedSince: a write done, or more of the one in progress taken by the kernel; a write begun is no drain', () => {
  const at = { doneBytes: 100, leftBytes: 50 };
  assert.equal(drainedSince(at, { doneBytes: 100, leftBytes: 50 }), false, 'unchanged');
  assert.equal(drainedSince(at, { doneBytes: 100, leftBytes: 49 }), true, 'the kernel took a byte of the write in progress');
  assert.equal(drainedSince(at, { doneBytes: 150, leftBytes: 6_000_000 }), true, 'a write done (and a larger one begun)');
  assert.equal(drainedSince({ doneBytes: 100, leftBytes: 0 }, { doneBytes: 100, leftBytes: 70 }), false, 'a write begun, none done');
});

test('a Pause whose queue drains nothing calls its timeout once it has lasted the paused timeout, unless it ended first', (t) => {
  mock.timers.enable({ apis: ['setTimeout', 'setInterval'] });
  t.after(() => mock.timers.reset());
  let timedOut = 0;
  const lasting = new Pause(1000, () => { timedOut += 1; }, STILL);
  advance(999);
  assert.equal(timedOut, 0);
  advance(1);
  assert.equal(timedOut, 1, 'paused too long: the connection is closed 4009');
  advance(5000);
  assert.equal(timedOut, 1, 'once');
  lasting.end();

  let endedTimedOut = 0;
  const ended = new Pause(1000, () => { endedTimedOut += 1; }, STILL);
  advance(500);
  ended.end();
  advance(5000);
  assert.equal(endedTimedOut, 0, 'a pause that ended stops its clock');
});

test('a Pause measures time without drain, not time paused: each drain seen starts the paused timeout over', (t) => {
  mock.timers.enable({ apis: ['setTimeout', 'setInterval'] });
  t.after(() => mock.timers.reset());
  // The kernel takes 1,000 bytes of the write in progress every 900 ms for 9 s (a
  // pause ten times the timeout), then nothing more: the client stopped reading.
  let left = 20_000;
  const drain = setInterval(() => { if (left > 11_000) left -= 1000; }, 900);
  let timedOutAt: number | undefined;
  let now = 0;
  const pause = new Pause(1000, () => { timedOutAt = now; }, () => ({ doneBytes: 0, leftBytes: left }));
  while (now < 20_000 && timedOutAt === undefined) {
    now += 1;
    mock.timers.tick(1);
  }
  clearInterval(drain);
  pause.end();
  // The last drain at 8.1 s, seen by the check at 8.25 s: four quiet checks after it.
  assert.equal(timedOutAt, 9250, 'closed a timeout after the check that saw the last drain');
});

test('a Pause wakes every waiter once when it ends, and ending it again wakes none', async () => {
  const pause = new Pause(60_000, () => assert.fail('not to time out'), STILL);
  const woken: number[] = [];
  const waits = [pause.whenOver().then(() => woken.push(1)), pause.whenOver().then(() => woken.push(2))];
  await Promise.resolve();
  assert.deepEqual(woken, [], 'not before the pause ends');
  pause.end();
  await Promise.all(waits);
  assert.deepEqual(woken, [1, 2]);
  pause.end();
  await Promise.resolve();
  assert.deepEqual(woken, [1, 2]);
});

test('a page\'s allowance is the high-water mark less what the socket holds, the budget\'s floor less it while the node is at its budget', () => {
  const limits = { socketHighWaterBytes: 1024 * 1024, socketHardCapBytes: 8 * 1024 * 1024 };
  const under = { reached: false, floorBytes: 64 * 1024 };
  const at = { reached: true, floorBytes: 64 * 1024 };
  // Each says whether it is the budget's, for the page's hold (review35 2).
  assert.deepEqual(pageAllowance(0, limits, under), { bytes: 1024 * 1024, byBudget: false });
  assert.deepEqual(pageAllowance(100_000, limits, under), { bytes: 1024 * 1024 - 100_000, byBudget: false });
  assert.deepEqual(pageAllowance(10_000, limits, at), { bytes: 64 * 1024 - 10_000, byBudget: true });
  // Past it: 0 or less, one message then a wait (connection-state.ts deliverPage).
  assert.ok(pageAllowance(100_000, limits, at).bytes < 0);
});
