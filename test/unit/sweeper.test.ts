/**
 * The sweeper's timer (src/store/sweeper.ts), on node:test's mock timers: a sweep every
 * interval; after failures the wait doubles per failure up to 64 intervals, capped at
 * 10 minutes unless one interval is longer; one sweep that succeeds brings the interval
 * back; stop() ends the loop and waits for a sweep in progress.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { Sweeper } from '../../src/store/sweeper.js';

/** A sweeper on mock timers whose sweeps fail or succeed as `plan` says (true: fails); answers the mock ms of each sweep. */
function plannedSweeper(t: TestContext, intervalMs: number, plan: boolean[]): { sweeper: Sweeper; at: number[]; advance: (ms: number, stepMs: number) => Promise<void> } {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  const at: number[] = [];
  const sweeper = new Sweeper(async () => {
    at.push(Date.now());
    if (plan.shift() === true) throw new Error('sweep failed');
    return 0;
  }, intervalMs);
  t.after(() => sweeper.stop());
  // In steps that every wait is a multiple of, letting each sweep's continuation
  // schedule the next timer before the clock moves on.
  const advance = async (ms: number, stepMs: number): Promise<void> => {
    for (let i = 0; i < ms; i += stepMs) {
      t.mock.timers.tick(stepMs);
      await settle();
    }
  };
  return { sweeper, at, advance };
}

/** Lets the promise continuations of a sweep that just ended run. */
async function settle(): Promise<void> {
  for (let k = 0; k < 5; k++) await Promise.resolve();
}

test('after failed sweeps the wait doubles per failure up to 64 intervals; a sweep that succeeds brings the interval back', async (t) => {
  const { sweeper, at, advance } = plannedSweeper(t, 100, [true, true, true, true, true, true, true, true, false, false]);
  sweeper.start();
  await advance(100 + 200 + 400 + 800 + 1600 + 3200 + 6400 + 6400 + 6400 + 100, 100);
  const waits = at.slice(1).map((ms, i) => ms - (at[i] ?? 0));
  assert.deepEqual(waits, [200, 400, 800, 1600, 3200, 6400, 6400, 6400, 100]);
});

test('the backoff is capped at 10 minutes', async (t) => {
  const { sweeper, at, advance } = plannedSweeper(t, 60_000, [true, true, true, true, true]);
  sweeper.start();
  await advance(60_000 + 120_000 + 240_000 + 480_000 + 600_000 + 600_000, 60_000);
  assert.deepEqual(at.slice(1).map((ms, i) => ms - (at[i] ?? 0)), [120_000, 240_000, 480_000, 600_000, 600_000]);
});

test('an interval longer than the cap is never shortened by a failure', async (t) => {
  const { sweeper, at, advance } = plannedSweeper(t, 20 * 60_000, [true, true]);
  sweeper.start();
  await advance(3 * 20 * 60_000, 60_000);
  assert.deepEqual(at.slice(1).map((ms, i) => ms - (at[i] ?? 0)), [20 * 60_000, 20 * 60_000]);
});

test('stop() waits for the sweep in progress, and no sweep runs after it', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  let sweeps = 0;
  let finish!: () => void;
  const sweeper = new Sweeper(async () => {
    sweeps++;
    await new Promise<void>((resolve) => {
      finish = resolve;
    });
    return 0;
  }, 100);
  sweeper.start();
  t.mock.timers.tick(100);
  assert.equal(sweeps, 1);
  let stopped = false;
  const stopping = sweeper.stop().then(() => {
    stopped = true;
  });
  await settle();
  assert.equal(stopped, false, 'stop waits for the sweep in progress');
  finish();
  await stopping;
  t.mock.timers.tick(10_000);
  assert.equal(sweeps, 1, 'no sweep after stop');
});
