/**
 * LazyTimers (src/delivery/lazy-timers.ts): a key is reported due once its last due
 * time has passed — never before it, however often the due time moved — and a new
 * due time does not create a timer when the armed one fires first. Node's mock timers
 * (setTimeout and Date) drive the clock, given to the timers as theirs; the last two
 * tests run real timers on the default clock (`performance.now`) and step the wall
 * clock (`Date`, mocked): a step moves no due time (walk31 F4's check of delivery's timers).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LazyTimers } from '../../src/delivery/lazy-timers.js';

function setup(t: import('node:test').TestContext): { timers: LazyTimers<string>; due: string[]; tick: (ms: number) => void } {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
  const due: string[] = [];
  return { timers: new LazyTimers<string>((key) => due.push(key), () => Date.now()), due, tick: (ms) => t.mock.timers.tick(ms) };
}

test('a due time moved later fires at the last one, once', (t) => {
  const { timers, due, tick } = setup(t);
  timers.set('a', 100);
  tick(50);
  timers.set('a', 100); // now due at 150
  tick(60);
  assert.deepEqual(due, [], 'not at the first due time');
  assert.ok(timers.has('a'));
  tick(39);
  assert.deepEqual(due, []);
  tick(1);
  assert.deepEqual(due, ['a']);
  assert.equal(timers.has('a'), false);
  tick(1000);
  assert.deepEqual(due, ['a'], 'once');
});

test('a due time moved sooner fires at the sooner one', (t) => {
  const { timers, due, tick } = setup(t);
  timers.set('a', 1000);
  timers.set('a', 30);
  tick(30);
  assert.deepEqual(due, ['a']);
  tick(2000);
  assert.deepEqual(due, ['a']);
});

test('null disarms; keys are independent; a key fires again when set again', (t) => {
  const { timers, due, tick } = setup(t);
  timers.set('a', 10);
  timers.set('b', 20);
  timers.set('a', null);
  tick(20);
  assert.deepEqual(due, ['b']);
  timers.set('b', 5);
  tick(5);
  assert.deepEqual(due, ['b', 'b']);
  timers.set('a', null); // disarming what is not armed is nothing
  assert.equal(timers.has('a'), false);
});

test('acks that keep moving the due time create no timer of their own', (t) => {
  const { timers, due, tick } = setup(t);
  const created = { n: 0 };
  const real = globalThis.setTimeout;
  t.mock.method(globalThis, 'setTimeout', (...args: Parameters<typeof setTimeout>) => {
    created.n++;
    return real(...args);
  });
  timers.set('a', 10_000);
  for (let i = 0; i < 1000; i++) {
    tick(1);
    timers.set('a', 10_000);
  }
  assert.equal(created.n, 1, 'one timer for a thousand due times');
  tick(10_000);
  assert.deepEqual(due, ['a']);
});

test('a due time moved a few ms later is not reported at the first: never before the last due time, however small the move', (t) => {
  // Mutant killed: a tolerance on the re-arm (`rest > 0` → `rest > 5`): a key whose due
  // time moved 3 ms later was reported due 3 ms early.
  const { timers, due, tick } = setup(t);
  timers.set('a', 100);
  tick(3);
  timers.set('a', 100); // now due at 103
  tick(97);
  assert.deepEqual(due, [], 'not at the first due time');
  tick(2);
  assert.deepEqual(due, []);
  tick(1);
  assert.deepEqual(due, ['a']);
});

/**
 * On real timers and the default clock: 'a' set 100 ms ahead, set again (an ack) after
 * `ackAfterMs`, then the wall clock (`Date`, mocked) stepped by `stepMs`.
 * @returns the timers, and when 'a' was reported due, ms after it was first set
 */
async function ackThenStep(t: import('node:test').TestContext, ackAfterMs: number, stepMs: number): Promise<{ timers: LazyTimers<string>; reported: Promise<number> }> {
  t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
  const started = performance.now();
  let report: (ms: number) => void = () => undefined;
  const reported = new Promise<number>((resolve) => { report = resolve; });
  const timers = new LazyTimers<string>(() => report(performance.now() - started));
  timers.set('a', 100);
  await new Promise((resolve) => setTimeout(resolve, ackAfterMs));
  timers.set('a', 100);
  t.mock.timers.setTime(Date.now() + stepMs);
  return { timers, reported };
}

test('a backward step of the wall clock by an hour does not hold a key an hour: it is due at its time', async (t) => {
  const { timers, reported } = await ackThenStep(t, 20, -3_600_000); // due 120 ms after the start
  // Real time: reported after about 120 ms, or a second has gone by without it.
  let timeout: NodeJS.Timeout | undefined;
  const giveUp = new Promise<number>((resolve) => { timeout = setTimeout(() => resolve(Number.POSITIVE_INFINITY), 1000); });
  const ms = await Promise.race([reported, giveUp]);
  clearTimeout(timeout);
  timers.set('a', null);
  assert.ok(ms >= 115 && ms < 1000, `due ${ms} ms after the start, not an hour later`);
});

test('a forward step of the wall clock by an hour does not make a key due before its last due time', async (t) => {
  const { reported } = await ackThenStep(t, 50, 3_600_000); // due 150 ms after the start
  const ms = await reported;
  assert.ok(ms >= 145, `due ${ms} ms after the start: not at the first due time (100 ms)`);
});
