/**
 * HistoryBudget (src/api/history-budget.ts): what history answers hold until their
 * responses close, and the refusal past the limit.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { FastifyReply } from 'fastify';
import { HistoryBudget } from '../../src/api/history-budget.js';
import { isPixiuError } from '../../src/errors.js';

/** A reply whose response closes when the test says. */
function reply(): { reply: FastifyReply; close: () => void } {
  const raw = new EventEmitter();
  return { reply: { raw } as unknown as FastifyReply, close: () => raw.emit('close') };
}

test('an answer holds what it asked, then what its page came to, until its response closes; past the limit the next is refused', () => {
  const budget = new HistoryBudget(100);
  const a = reply();
  const resize = budget.hold(a.reply, 80);
  assert.equal(budget.inUse, 80);
  assert.throws(() => budget.hold(reply().reply, 30), (err: unknown) => isPixiuError(err, 'UNAVAILABLE'));
  resize(20);
  assert.equal(budget.inUse, 20);
  const b = reply();
  budget.hold(b.reply, 80);
  assert.equal(budget.inUse, 100);
  a.close();
  assert.equal(budget.inUse, 80);
  resize(50);
  assert.equal(budget.inUse, 80, 'a resize after the close changes nothing');
  b.close();
  assert.equal(budget.inUse, 0);
  // One answer is taken whatever it asks, when nothing is held: a page over the limit is still read.
  budget.hold(reply().reply, 500);
  assert.equal(budget.inUse, 500);
});
