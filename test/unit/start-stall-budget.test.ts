/**
 * The start's one budget for Redis stalls (start-stall.ts `StartStallWait`): a second
 * wait gets what is left of the 30 s, and its warn line's `waitMs` says so (README
 * "Running with your own Redis": "a second stall gets what is left"), not 30 000 again.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { capturingLogger } from '../harness/log-capture.js';
import { START_STALL_WAIT_MS, StartStallWait } from '../../src/service/start-stall.js';

/** A stall as ioredis reports one: a command past the command timeout. */
const stall = (): Error => new Error('Command timed out');

test('a second stall wait warns with what is left of the start budget in waitMs, and the budget ends at 30 s from the first', (t) => {
  t.mock.timers.enable({ apis: ['Date'], now: 1_000_000 });
  const { logger, lines } = capturingLogger();
  const stalls = new StartStallWait(logger, () => undefined);
  const fields = { redisUrl: 'redis://r:6379' };
  assert.equal(stalls.met(stall(), 'tries again every second until it does', fields), true);
  t.mock.timers.tick(20_000);
  stalls.answered('redis://r:6379');
  assert.equal(stalls.met(stall(), 'stops what it started and runs again once Redis answers', { ...fields, step: 'reading the inbox generation' }), true);
  const waits = lines.filter((l) => l.msg?.startsWith('Redis did not answer at start') === true);
  assert.deepEqual(waits.map((l) => l.waitMs), [START_STALL_WAIT_MS, START_STALL_WAIT_MS - 20_000]);
  t.mock.timers.tick(10_000);
  assert.equal(stalls.met(stall(), 'stops what it started and runs again once Redis answers', fields), false);
});
