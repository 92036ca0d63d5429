/**
 * The node's budget for its WebSockets' send buffers (src/gateway/buffer-budget.ts):
 * its running sum goes up and down with what each connection counts, never below 0, and
 * a closed connection's bytes leave it; once at the budget, a write past the floor
 * pauses its connection, and such a pause ends only under the floor or with the node
 * back under its budget, and a live broadcast or publication to a connection it holds
 * back is refused; the default is a quarter of memory, at most 2 GiB. The
 * end-to-end behaviour on real sockets: test/gateway/buffer-budget.test.ts.
 */
import { mock, test } from 'node:test';
import assert from 'node:assert/strict';
import { afterWrite, endsPause, Pause } from '../../src/gateway/backpressure.js';
import {
  BUDGET_FLOOR_BYTES, BUDGET_REACHED_LOG, BufferBudget, DEFAULT_BUDGET_CAP_BYTES, LIVE_REFUSED_REASON, budgetFloorBytes, defaultBufferBudget, resolveBufferBudget,
} from '../../src/gateway/buffer-budget.js';
import { capturingLogger } from '../harness/log-capture.js';

const GiB = 1024 * 1024 * 1024;
const LIMITS = { socketHighWaterBytes: 1000, socketHardCapBytes: 8000 };

test('the sum goes up and down with what each connection counts, never below 0; a closed connection\'s bytes leave it', () => {
  const budget = new BufferBudget(1000, 100, capturingLogger().logger);
  let a = budget.recount(0, 300);
  let b = budget.recount(0, 500);
  assert.equal(budget.heldBytes, 800);
  assert.equal(budget.reached, false);
  a = budget.recount(a, 600);
  assert.equal(budget.heldBytes, 1100);
  assert.equal(budget.reached, true, 'at or over the budget');
  b = budget.recount(b, 0);
  assert.equal(budget.heldBytes, 600, 'b drained');
  assert.equal(budget.reached, false);
  // Closed: its count goes back to 0, whatever it held.
  a = budget.recount(a, 0);
  b = budget.recount(b, 0);
  assert.deepEqual([a, b, budget.heldBytes], [0, 0, 0]);
  // Many connections up and down at random: the sum is always the total of their counts.
  const counts = new Array<number>(50).fill(0);
  for (let i = 0; i < 5000; i++) {
    const k = i % counts.length;
    counts[k] = budget.recount(counts[k] as number, (i * 7919) % 3 === 0 ? 0 : (i * 104_729) % 5000);
    assert.ok(budget.heldBytes >= 0);
  }
  assert.equal(budget.heldBytes, counts.reduce((s, n) => s + n, 0));
  for (let k = 0; k < counts.length; k++) counts[k] = budget.recount(counts[k] as number, 0);
  assert.equal(budget.heldBytes, 0);
});

test('at the budget a write past the floor pauses; the pause ends under the floor or with the node under its budget, and below the usual mark', () => {
  const onPause = mock.fn();
  const logged = capturingLogger();
  const budget = new BufferBudget(1000, 100, logged.logger, onPause);
  assert.equal(afterWrite(200, false, LIMITS, budget), 'ok', 'under the budget: held to the high-water mark alone');
  const held = budget.recount(0, 1000);
  assert.equal(afterWrite(100, false, LIMITS, budget), 'ok', 'at the floor is not past it');
  assert.equal(afterWrite(101, false, LIMITS, budget), 'budget');
  assert.equal(afterWrite(101, true, LIMITS, budget), 'ok', 'already paused: no second pause');
  assert.equal(afterWrite(1001, false, LIMITS, budget), 'pause', 'past the high-water mark is its own pause');
  assert.equal(afterWrite(8001, false, LIMITS, budget), 'close');

  const pause = new Pause(60_000, () => assert.fail('no timeout'), () => ({ doneBytes: 0, leftBytes: 0 }), true);
  try {
    assert.equal(endsPause(pause, 400, LIMITS, budget), false, 'over the floor while the node is at its budget');
    assert.equal(endsPause(pause, 100, LIMITS, budget), true, 'at the floor');
    budget.recount(held, 0);
    assert.equal(endsPause(pause, 400, LIMITS, budget), true, 'the node under its budget: the usual mark');
    assert.equal(endsPause(pause, 500, LIMITS, budget), false, 'not below half the high-water mark');
    assert.equal(endsPause(undefined, 0, LIMITS, budget), false, 'no pause');
  } finally {
    pause.end();
  }

  budget.paused('c1', 500);
  budget.paused('c2', 600);
  assert.equal(onPause.mock.callCount(), 2, 'each pause counted');
  const warned = logged.lines.filter((l) => l.msg === BUDGET_REACHED_LOG);
  assert.equal(warned.length, 1, 'the warning is thinned');
  assert.deepEqual([warned[0]?.level, warned[0]?.budgetBytes, warned[0]?.conn], [40, 1000, 'c1']);
});

test('at the budget a live broadcast or publication to a paused connection past the floor is refused (its connection closed 4009) and counted; under it, or unpaused, or at the floor, it is written', () => {
  const onRefused = mock.fn();
  const budget = new BufferBudget(1000, 100, capturingLogger().logger, undefined, onRefused);
  assert.equal(budget.refusesLive(5000, true), undefined, 'under the budget: only the hard cap stops it');
  const held = budget.recount(0, 1000);
  assert.equal(budget.refusesLive(101, false), undefined, 'not paused: written (and then paused by the budget)');
  assert.equal(budget.refusesLive(100, true), undefined, 'paused at the floor');
  assert.equal(budget.refusesLive(101, true), LIVE_REFUSED_REASON);
  assert.equal(onRefused.mock.callCount(), 1, 'each refusal counted');
  assert.ok(Buffer.byteLength(LIVE_REFUSED_REASON) <= 123, 'the reason fits a close frame whole');
  budget.recount(held, 0);
  assert.equal(budget.refusesLive(101, true), undefined, 'the node back under its budget');
});

test('no budget (0): the sum is kept, nothing is paused for it', () => {
  const budget = new BufferBudget(0, 100, capturingLogger().logger);
  budget.recount(0, 10 * GiB);
  assert.equal(budget.reached, false);
  assert.equal(budget.refusesLive(10 * GiB, true), undefined);
  assert.equal(afterWrite(900, false, LIMITS, budget), 'ok');
  assert.equal(budget.heldBytes, 10 * GiB);
});

test('the default is a quarter of the memory the process may use (its cgroup limit when lower), at most 2 GiB; the floor is 64 KiB or half the high-water mark', () => {
  assert.equal(defaultBufferBudget(4 * GiB), GiB);
  assert.equal(defaultBufferBudget(64 * GiB), DEFAULT_BUDGET_CAP_BYTES);
  assert.equal(defaultBufferBudget(64 * GiB, 2 * GiB), GiB / 2, 'a container limit below the machine\'s memory');
  assert.equal(defaultBufferBudget(2 * GiB, 0), GiB / 2, '0: no limit');
  assert.equal(defaultBufferBudget(2 * GiB, 8 * GiB), GiB / 2, 'a limit above the memory is the memory');
  assert.equal(budgetFloorBytes(1024 * 1024), BUDGET_FLOOR_BYTES);
  assert.equal(budgetFloorBytes(16 * 1024), 8 * 1024);

  const logged = capturingLogger();
  assert.equal(resolveBufferBudget(undefined, logged.logger, () => ({ total: 8 * GiB, constrained: undefined })), 2 * GiB);
  assert.equal(resolveBufferBudget(0, logged.logger), 0);
  assert.equal(resolveBufferBudget(5000, logged.logger), 5000);
  assert.deepEqual(logged.lines.map((l) => [l.level, l.socketBufferBudgetBytes]), [[30, 2 * GiB], [30, 0], [30, 5000]]);
  // An unlimited cgroup reads as ~2^64: logged as no limit.
  const unlimited = capturingLogger();
  assert.equal(resolveBufferBudget(undefined, unlimited.logger, () => ({ total: 2 * GiB, constrained: 2 ** 64 })), GiB / 2);
  assert.equal(resolveBufferBudget(undefined, unlimited.logger, () => ({ total: 8 * GiB, constrained: 2 * GiB })), GiB / 2);
  assert.deepEqual(unlimited.lines.map((l) => l.memoryLimitBytes), [null, 2 * GiB]);
});
