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

/** A reply on a connection: its response and its connection close when the test says; the connection counts destroy(). */
function replyOn(destroyed = false): { reply: FastifyReply; connection: EventEmitter & { destroyed: boolean; destroys: number } } {
  const raw = new EventEmitter();
  const connection = Object.assign(new EventEmitter(), {
    destroyed,
    destroys: 0,
    destroy(): void {
      connection.destroys += 1;
      connection.destroyed = true;
      connection.emit('close');
    },
  });
  return { reply: { raw, request: { raw: { socket: connection } } } as unknown as FastifyReply, connection };
}

test('an answer whose connection has closed already holds nothing; one whose connection closes gives back what it held', () => {
  const budget = new HistoryBudget(100, 60_000);
  const resize = budget.hold(replyOn(true).reply, 80);
  assert.equal(budget.inUse, 0, 'a request run after its connection closed holds nothing');
  resize(50);
  assert.equal(budget.inUse, 0);
  const live = replyOn();
  budget.hold(live.reply, 80);
  assert.equal(budget.inUse, 80);
  live.connection.emit('close');
  assert.equal(budget.inUse, 0, 'given back when the connection closes, its response never having closed');
  live.reply.raw.emit('close');
  assert.equal(budget.inUse, 0, 'given back once');
  assert.equal(live.connection.listenerCount('close'), 0, 'no listener left on the connection');
});

test('an answer still held at the take timeout closes its connection; one given back in time leaves it open', async () => {
  const budget = new HistoryBudget(100, 30);
  const taken = replyOn();
  budget.hold(taken.reply, 10);
  taken.reply.raw.emit('close');
  assert.equal(taken.connection.listenerCount('close'), 0, 'a keep-alive connection collects no listeners');
  const untaken = replyOn();
  budget.hold(untaken.reply, 10);
  await new Promise((resolve) => setTimeout(resolve, 80));
  assert.equal(untaken.connection.destroys, 1);
  assert.equal(taken.connection.destroys, 0);
  assert.equal(budget.abandoned, 1);
  assert.equal(budget.inUse, 0);
});
