/**
 * The shutdown's steps (src/service/shutdown-steps.ts, DESIGN.md §6): run in order,
 * each even after an earlier one failed; a step that waits on Redis is given up after
 * its bound (its `giveUp` called: drop the connection) and the shutdown goes on; all
 * such steps share one budget, so a hung Redis holds the exit for that budget once,
 * not once per step. A step with a bound of its own (the store's close) is given up
 * after it too, and the shutdown answers it unfinished, as when it fails. The steps are the test's own;
 * the service's shutdown with a hung Redis is tested in test/service/shutdown.test.ts,
 * on a stalled disk in test/service/stalled-shutdown.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MIN_STEP_MS, closeAll, type CloseStep } from '../../src/service/shutdown-steps.js';
import { capturingLogger } from '../harness/log-capture.js';

/** A step of Redis that never answers. */
const never = (): Promise<unknown> => new Promise(() => undefined);

test('steps run in order, each after one that failed; the failure is logged with the step\'s name', async () => {
  const { logger, lines } = capturingLogger();
  const ran: string[] = [];
  const step = (what: string, fail = false): CloseStep => ({
    what,
    run: async () => {
      ran.push(what);
      if (fail) throw new Error(`${what} broke`);
    },
  });
  await closeAll(logger, [step('connections'), step('http', true), step('store')], 1000);
  assert.deepEqual(ran, ['connections', 'http', 'store']);
  assert.deepEqual(lines.filter((l) => l.msg === 'shutdown step failed').map((l) => [l.level, l.what]), [[50, 'http']]);
});

test('a Redis step that does not answer is given up after its bound and the next step runs; the steps share one budget for Redis', async () => {
  const { logger, lines } = capturingLogger();
  const events: string[] = [];
  const redisStep = (what: string, boundMs: number): CloseStep => ({
    what,
    run: () => {
      events.push(`run ${what}`);
      return never();
    },
    redis: { boundMs, giveUp: () => events.push(`give up ${what}`) },
  });
  const started = performance.now();
  await closeAll(logger, [
    redisStep('cursors', 150),
    { what: 'store', run: async () => { events.push('run store'); } },
    // What is left of the 600 ms budget: about 450 ms, not its own 1000 ms bound (a
    // budget wide enough that a timer late on a loaded machine still leaves some).
    redisStep('redis', 1000),
    // None left: given up without being run.
    redisStep('after', 1000),
  ], 600);
  const took = performance.now() - started;
  assert.deepEqual(events, ['run cursors', 'give up cursors', 'run store', 'run redis', 'give up redis', 'give up after']);
  assert.ok(took >= 550 && took < 1400, `the budget bounds the whole shutdown: ${Math.round(took)} ms`);
  // Handled, not failed: a warning naming the step and its time, no stack (an ops newcomer's finding).
  assert.deepEqual(lines.filter((l) => l.msg === 'shutdown step failed'), []);
  const givenUp = lines.filter((l) => l.msg?.startsWith('shutdown step given up') === true || l.msg?.startsWith('shutdown step not run') === true);
  assert.deepEqual(givenUp.map((l) => [l.level, l.what, l.msg?.startsWith('shutdown step not run')]), [[40, 'cursors', false], [40, 'redis', false], [40, 'after', true]]);
  assert.equal(givenUp[0]?.timeoutMs, 150);
  const left = Number(givenUp[1]?.timeoutMs);
  assert.ok(left > 0 && left <= 450, `the redis step had what was left of the budget: ${left} ms`);
  assert.deepEqual(givenUp.filter((l) => 'err' in l || JSON.stringify(l).includes('"stack"')), [], 'no error, no stack');
});

test(`a Redis step with less than ${MIN_STEP_MS} ms of the budget left is not run: no step is started with a millisecond to go`, async () => {
  const { logger, lines } = capturingLogger();
  const events: string[] = [];
  const BUDGET_MS = 200;
  let budgetStart = 0;
  await closeAll(logger, [
    {
      what: 'cursors',
      // Answers, on the CPU, 8 ms before the budget ends: no timer whose lateness could move it.
      run: async () => {
        budgetStart = performance.now();
        events.push('run cursors');
        while (performance.now() < budgetStart + BUDGET_MS - (MIN_STEP_MS - 2));
      },
      redis: { boundMs: 1000, giveUp: () => events.push('give up cursors') },
    },
    { what: 'after', run: async () => { events.push('run after'); }, redis: { boundMs: 1000, giveUp: () => events.push('give up after') } },
  ], BUDGET_MS);
  assert.deepEqual(events, ['run cursors', 'give up after']);
  assert.deepEqual(lines.filter((l) => l.msg?.startsWith('shutdown step not run') === true).map((l) => l.what), ['after']);
});

test('a step with a bound of its own (the store\'s close on a stalled disk) is given up after it, outside the Redis budget; the steps after it run, and the shutdown answers it unfinished', async () => {
  const { logger, lines } = capturingLogger();
  const events: string[] = [];
  const started = performance.now();
  const unfinished = await closeAll(logger, [
    // The Redis budget counts from here…
    { what: 'store lease', run: async () => { events.push('run store lease'); }, redis: { boundMs: 100 } },
    { what: 'store', run: () => { events.push('run store'); return never(); }, bound: { ms: 200, giveUp: (ms) => events.push(`give up store after ${ms}`) } },
    // … less the bounded step's time, longer than the whole budget: this one is run, not found out of time.
    { what: 'redis', run: async () => { events.push('run redis'); }, redis: { boundMs: 100 } },
    { what: 'local redis-server', run: async () => { events.push('run local redis-server'); } },
  ], 100);
  const took = performance.now() - started;
  assert.deepEqual(events, ['run store lease', 'run store', 'give up store after 200', 'run redis', 'run local redis-server']);
  assert.deepEqual(unfinished, ['store']);
  assert.ok(took >= 190 && took < 1000, `given up after its bound: ${Math.round(took)} ms`);
  // Its giveUp says why: nothing more is logged for it.
  assert.deepEqual(lines.filter((l) => l.level >= 40), []);
});

test('a shutdown whose bounded steps all end answers nothing unfinished', async () => {
  const { logger } = capturingLogger();
  const unfinished = await closeAll(logger, [
    { what: 'store', run: async () => undefined, bound: { ms: 10_000, giveUp: () => assert.fail('not given up') } },
    { what: 'redis', run: never, redis: { boundMs: 50 } },
  ], 50);
  // A Redis step given up is handled, not unfinished.
  assert.deepEqual(unfinished, []);
});

test('a step with a bound of its own that fails (the store\'s close answering an I/O error) is answered unfinished, as one given up is, and logged as failed; a failed step without a bound is not', async () => {
  const { logger, lines } = capturingLogger();
  const events: string[] = [];
  const unfinished = await closeAll(logger, [
    { what: 'http', run: () => Promise.reject(new Error('http broke')) },
    { what: 'store', run: () => Promise.reject(new Error('IO error: EIO')), bound: { ms: 10_000, giveUp: () => assert.fail('failed, not given up') } },
    { what: 'redis', run: async () => { events.push('run redis'); }, redis: { boundMs: 100 } },
  ], 100);
  assert.deepEqual(unfinished, ['store']);
  assert.deepEqual(events, ['run redis']);
  assert.deepEqual(lines.filter((l) => l.msg === 'shutdown step failed').map((l) => [l.level, l.what]), [[50, 'http'], [50, 'store']]);
});
