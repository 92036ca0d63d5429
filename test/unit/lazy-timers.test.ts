/**
 * LazyTimers (src/delivery/lazy-timers.ts): a key is reported due once its last due
 * time has passed — never before it, however often the due time moved — and a new
 * due time does not create a timer when the armed one fires first. Node's mock timers
 * (setTimeout and Date) drive the clock.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LazyTimers } from '../../src/delivery/lazy-timers.js';

function setup(t: import('node:test').TestContext): { timers: LazyTimers<string>; due: string[]; tick: (ms: number) => void } {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
  const due: string[] = [];
  return { timers: new LazyTimers<string>((key) => due.push(key)), due, tick: (ms) => t.mock.timers.tick(ms) };
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
