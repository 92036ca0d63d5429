/**
 * The backpressure decisions of one socket (src/gateway/backpressure.ts, DESIGN.md §5
 * "Backpressure"): a write pauses delivery when it takes the queued bytes past the
 * high-water mark, closes the connection (4009) past the hard cap, and a pause ends only
 * once the queue has drained below half the high-water mark — not as soon as it dips
 * under the mark, which would pause and resume the connection on every other frame.
 * The functions are pure (a Pause keeps its timer and waiters); the end-to-end behaviour on real sockets is
 * test/gateway/backpressure.test.ts.
 */
import { mock, test } from 'node:test';
import assert from 'node:assert/strict';
import { afterWrite, drained, Pause } from '../../src/gateway/backpressure.js';

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

test('a Pause calls its timeout once it has lasted the paused timeout, unless it ended first', (t) => {
  mock.timers.enable({ apis: ['setTimeout'] });
  t.after(() => mock.timers.reset());
  let timedOut = 0;
  const lasting = new Pause(1000, () => { timedOut += 1; });
  mock.timers.tick(999);
  assert.equal(timedOut, 0);
  mock.timers.tick(1);
  assert.equal(timedOut, 1, 'paused too long: the connection is closed 4009');
  lasting.end();

  let endedTimedOut = 0;
  const ended = new Pause(1000, () => { endedTimedOut += 1; });
  mock.timers.tick(500);
  ended.end();
  mock.timers.tick(5000);
  assert.equal(endedTimedOut, 0, 'a pause that ended stops its timer');
});

test('a Pause wakes every waiter once when it ends, and ending it again wakes none', async () => {
  const pause = new Pause(60_000, () => assert.fail('not to time out'));
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
