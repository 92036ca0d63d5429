/**
 * HistoryBudget (src/api/history-budget.ts): what history answers hold until their
 * responses close, and the refusal past the limit.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { FastifyReply } from 'fastify';
import { HistoryBudget } from '../../src/api/history-budget.js';
import { pageHoldBytes } from '../../src/api/history.js';
import { isPixiuError } from '../../src/errors.js';

/** A reply whose response closes when the test says. */
function reply(): { reply: FastifyReply; close: () => void } {
  const raw = new EventEmitter();
  return { reply: { raw } as unknown as FastifyReply, close: () => raw.emit('close') };
}

test('an answer holds what it asked, then what its page came to, until its response closes; past the limit the next is refused', () => {
  const budget = new HistoryBudget(100);
  const a = reply();
  const resize = budget.hold(a.reply, 80, 'u');
  assert.equal(budget.inUse, 80);
  assert.throws(() => budget.hold(reply().reply, 30, 'u'), (err: unknown) => isPixiuError(err, 'UNAVAILABLE'));
  resize(20);
  assert.equal(budget.inUse, 20);
  const b = reply();
  budget.hold(b.reply, 80, 'u');
  assert.equal(budget.inUse, 100);
  a.close();
  assert.equal(budget.inUse, 80);
  resize(50);
  assert.equal(budget.inUse, 80, 'a resize after the close changes nothing');
  b.close();
  assert.equal(budget.inUse, 0);
  // One answer is taken whatever it asks, when nothing is held: a page over the limit is still read.
  budget.hold(reply().reply, 500, 'u');
  assert.equal(budget.inUse, 500);
});

test('one user\'s answers hold at most their share: past it a request for that user is RATE_LIMITED while other users\' are taken; a resize and a close count in the share', () => {
  const budget = new HistoryBudget(1000, 60_000, undefined, 300);
  const a = reply();
  const resizeA = budget.hold(a.reply, 200, 'alice');
  budget.hold(reply().reply, 100, 'alice');
  assert.throws(() => budget.hold(reply().reply, 1, 'alice'), (err: unknown) => isPixiuError(err, 'RATE_LIMITED'));
  budget.hold(reply().reply, 600, 'bob');
  assert.equal(budget.inUse, 900);
  resizeA(50);
  budget.hold(reply().reply, 150, 'alice');
  assert.throws(() => budget.hold(reply().reply, 1, 'alice'), (err: unknown) => isPixiuError(err, 'RATE_LIMITED'), 'the resize counted: 50 + 100 + 150');
  a.close();
  budget.hold(reply().reply, 50, 'alice');
  assert.equal(budget.inUse, 900, 'alice 100 + 150 + 50, bob 600');
  // One answer is taken whatever it asks when none of its user's is held (the node's limit aside).
  const big = new HistoryBudget(1000, 60_000, undefined, 300);
  big.hold(reply().reply, 500, 'carol');
  assert.equal(big.inUse, 500);
});

test('the 429 of a user\'s share names how many requests are in flight and what each holds up front, not pages: 63 of limit=1 fill 8 MiB of an empty inbox', () => {
  const budget = new HistoryBudget();
  const perRequest = pageHoldBytes(1, 65_536);
  const held = Array.from({ length: 63 }, () => reply());
  for (const r of held) budget.hold(r.reply, perRequest, 'alice');
  const refusal = (): string => {
    try {
      budget.hold(reply().reply, perRequest, 'alice');
    } catch (err) {
      assert.ok(isPixiuError(err, 'RATE_LIMITED'));
      return err.message;
    }
    return assert.fail('not refused');
  };
  assert.equal(refusal(), 'user alice has 63 history requests in flight on this node, holding 7.89 MiB of the 8 MiB one user\'s may hold: '
    + 'each holds what its page could come to (this one: 128.2 KiB) from when it is read until its client has taken the answer, however small the inbox; '
    + 'send them one at a time, reading each answer before asking for the next, or retry shortly');
  // The count follows the answers given back; a resize counts in the bytes, not the requests.
  for (const r of held.slice(0, 60)) r.close();
  const big = budget.hold(reply().reply, 2 * 1024 * 1024, 'alice');
  big(5 * 1024 * 1024);
  budget.hold(reply().reply, 2.5 * 1024 * 1024, 'alice');
  assert.match(refusal(), /^user alice has 5 history requests in flight on this node, holding 7\.88 MiB of the 8 MiB /);
});

/** A connection that counts destroy(), and replies on it whose responses have it (`queued`: not yet, as a pipelined one). */
function connectionOf(destroyed = false): EventEmitter & { destroyed: boolean; destroys: number; reply(queued?: boolean): FastifyReply } {
  const connection = Object.assign(new EventEmitter(), {
    destroyed,
    destroys: 0,
    destroy(): void {
      connection.destroys += 1;
      connection.destroyed = true;
      connection.emit('close');
    },
    reply(queued = false): FastifyReply {
      const raw = Object.assign(new EventEmitter(), { socket: queued ? null : connection });
      return { raw, request: { raw: { socket: connection } } } as unknown as FastifyReply;
    },
  });
  return connection;
}

test('an answer whose connection has closed already holds nothing; answers whose connection closes give back what they held', () => {
  const budget = new HistoryBudget(1000, 60_000);
  const resize = budget.hold(connectionOf(true).reply(), 80, 'u');
  assert.equal(budget.inUse, 0, 'a request run after its connection closed holds nothing');
  resize(50);
  assert.equal(budget.inUse, 0);
  const live = connectionOf();
  const first = live.reply();
  budget.hold(first, 80, 'u');
  // Pipelined behind it: twenty more, one listener on the connection for all.
  for (let i = 0; i < 20; i++) budget.hold(live.reply(true), 10, 'u');
  assert.equal(budget.inUse, 280);
  assert.equal(live.listenerCount('close'), 1, 'one listener on the connection, however many answers it holds');
  live.emit('close');
  assert.equal(budget.inUse, 0, 'given back when the connection closes, the responses never having closed');
  first.raw.emit('close');
  assert.equal(budget.inUse, 0, 'given back once');
  assert.equal(live.listenerCount('close'), 0, 'no listener left on the connection');
});

test('an answer still held at the take timeout closes its connection; one given back in time leaves it open; a queued one waits for its turn', async () => {
  let abandoned = 0;
  const budget = new HistoryBudget(100, 30, () => { abandoned += 1; });
  const taken = connectionOf();
  const reply = taken.reply();
  budget.hold(reply, 10, 'u');
  reply.raw.emit('close');
  assert.equal(taken.listenerCount('close'), 0, 'a keep-alive connection collects no listeners');
  const untaken = connectionOf();
  budget.hold(untaken.reply(), 10, 'u');
  // Queued behind an answer being read: its time starts when it gets the connection.
  const reading = connectionOf();
  const queued = reading.reply(true);
  budget.hold(queued, 10, 'u');
  // A time is what is tested; timers run in order of due time, so the 30 ms ones have run by this 80 ms one, on any load.
  await new Promise((resolve) => setTimeout(resolve, 80));
  assert.equal(untaken.destroys, 1);
  assert.equal(taken.destroys, 0);
  assert.equal(reading.destroys, 0, 'a queued answer\'s time has not started');
  assert.equal(abandoned, 1);
  assert.equal(budget.inUse, 10);
  queued.raw.emit('socket', reading);
  await new Promise((resolve) => setTimeout(resolve, 80));
  assert.equal(reading.destroys, 1, 'once it has the connection, its time runs');
  assert.equal(abandoned, 2);
  assert.equal(budget.inUse, 0);
});
