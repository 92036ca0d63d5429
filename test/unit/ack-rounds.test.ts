/**
 * The node-wide rounds of ack-cursor writes (src/delivery/ack-rounds.ts, DESIGN.md §5):
 * every session that joined is flushed together, once, one interval after the round
 * opened; a session that flushed on its own leaves the round. Timers are node:test's
 * mock timers.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AckRounds, type AckFlushable } from '../../src/delivery/ack-rounds.js';

/** A session double that counts its flushes. */
function session(): AckFlushable & { flushes: number } {
  const s = {
    flushes: 0,
    flushAcks: () => {
      s.flushes += 1;
      return Promise.resolve();
    },
  };
  return s;
}

test('every session of a round is flushed once, together, one interval after the round opened', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const rounds = new AckRounds(100);
  const [a, b, c] = [session(), session(), session()];
  rounds.add(a);
  t.mock.timers.tick(60);
  rounds.add(b);
  rounds.add(a);
  rounds.add(c);
  assert.equal(rounds.pending, 3);
  t.mock.timers.tick(39);
  assert.deepEqual([a.flushes, b.flushes, c.flushes], [0, 0, 0], 'not before the interval');
  t.mock.timers.tick(1);
  assert.deepEqual([a.flushes, b.flushes, c.flushes], [1, 1, 1]);
  assert.equal(rounds.pending, 0);
  t.mock.timers.tick(1000);
  assert.deepEqual([a.flushes, b.flushes, c.flushes], [1, 1, 1], 'nothing pending: no more flushes');
});

test('a session joining after a round is in the next one, an interval later', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const rounds = new AckRounds(100);
  const a = session();
  rounds.add(a);
  t.mock.timers.tick(100);
  rounds.add(a);
  t.mock.timers.tick(99);
  assert.equal(a.flushes, 1, 'at most one write per interval');
  t.mock.timers.tick(1);
  assert.equal(a.flushes, 2);
});

test('a session joining a round late is flushed with it, and the next round is a whole interval after it', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const rounds = new AckRounds(100);
  const [a, b] = [session(), session()];
  rounds.add(a);
  t.mock.timers.tick(90);
  rounds.add(b);
  t.mock.timers.tick(10);
  assert.deepEqual([a.flushes, b.flushes], [1, 1], 'b joined the open round: flushed with a at 100 ms');
  t.mock.timers.tick(10);
  rounds.add(b);
  t.mock.timers.tick(80);
  assert.equal(b.flushes, 1, 'not again at 190 ms, 90 ms after its last write: b joining late opened no round of its own');
  t.mock.timers.tick(20);
  assert.equal(b.flushes, 2, 'the next round, one interval after it opened at 110 ms');
});

test('a session that flushed on its own leaves the round', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const rounds = new AckRounds(100);
  const [a, b] = [session(), session()];
  rounds.add(a);
  rounds.add(b);
  rounds.delete(a);
  t.mock.timers.tick(100);
  assert.deepEqual([a.flushes, b.flushes], [0, 1]);
});

test('a round every session left keeps no timer: a stopping process is not held for an interval, and the next session opens a new round', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const rounds = new AckRounds(100);
  const [a, b] = [session(), session()];
  rounds.add(a);
  t.mock.timers.tick(60);
  rounds.delete(a);
  rounds.add(b);
  t.mock.timers.tick(40);
  assert.equal(b.flushes, 0, 'the emptied round was dropped, not run for b at 100 ms');
  t.mock.timers.tick(60);
  assert.equal(b.flushes, 1, 'b has a round of its own, one interval after it joined');
  assert.equal(a.flushes, 0);
});
