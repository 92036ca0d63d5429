/**
 * The ack timeout does not run while a connection is paused by backpressure
 * (docs/protocol.md "Flow control": the ack timeout counts from the resume). A device
 * that read nothing for longer than the ack timeout, then read and acked what it was
 * sent, was resent the round that came due during the pause at the instant of the
 * resume, marked `redelivered`, amid its fresh stream (walk20 finding 3a: 54-71 copies
 * of 60 KB messages).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CloseCode } from '../../src/delivery/close-codes.js';
import { CONFIG, Driver } from './machine-driver.js';

/** A driver whose connection `a` logged in to an inbox of `n` messages, got its window (3) and paused. */
function pausedWithWindow(n: number): Driver {
  const d = new Driver();
  d.inbox.append(n);
  d.login('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'msg 2', 'msg 3']);
  assert.equal(d.timers.get('a'), CONFIG.ackTimeoutMs);
  assert.deepEqual(d.take(d.m.pause('a')), []);
  return d;
}

test('a timer due while paused runs no round; the drain starts the ack timeout over, and acks after it get no resend', () => {
  const d = pausedWithWindow(6);
  assert.deepEqual(d.due('a'), [{ kind: 'timer', conn: 'a', delayMs: CONFIG.ackTimeoutMs }], 'no round while paused; the timer is kept');
  assert.deepEqual(d.m.cursor('a'), { acked: 0, sent: 3, inflight: 3, paused: true }, 'not rewound');
  d.drain('a');
  d.settle();
  assert.equal(d.timers.get('a'), CONFIG.ackTimeoutMs, 'the whole ack timeout, from the resume');
  assert.deepEqual(d.brief('a'), [], 'nothing resent at the resume');
  d.ack('a', 1);
  d.settle();
  d.ack('a', 3);
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 4', 'msg 5', 'msg 6'], 'the fresh stream, no redelivered copy');
});

test('a client that reads after the pause and never acks still gets its rounds and 4008, counted from the resume', () => {
  const d = pausedWithWindow(3);
  d.due('a');
  d.drain('a');
  d.settle();
  assert.deepEqual(d.brief('a'), []);
  for (const wait of CONFIG.backoffMs) {
    d.due('a');
    d.settle();
    assert.deepEqual(d.brief('a'), ['msg 1 r', 'msg 2 r', 'msg 3 r']);
    assert.equal(d.timers.get('a'), wait);
  }
  assert.deepEqual(d.closes, []);
  d.due('a');
  assert.deepEqual(d.closes, [{ conn: 'a', code: CloseCode.ackTimeout }]);
});

test('a pause during a back-off: no round is counted while paused; the drain starts that back-off over', () => {
  const d = pausedWithWindow(3);
  d.drain('a');
  d.due('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 1 r', 'msg 2 r', 'msg 3 r']);
  assert.equal(d.timers.get('a'), CONFIG.backoffMs[0]);
  d.take(d.m.pause('a'));
  for (let i = 0; i < 5; i++) {
    assert.deepEqual(d.due('a'), [{ kind: 'timer', conn: 'a', delayMs: CONFIG.backoffMs[0] }], 'no round, no 4008 while paused');
  }
  d.drain('a');
  assert.equal(d.timers.get('a'), CONFIG.backoffMs[0], 'the first back-off again, not the next');
  d.due('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 1 r', 'msg 2 r', 'msg 3 r']);
  assert.equal(d.timers.get('a'), CONFIG.backoffMs[1]);
});

test('a round rewound before the pause sends its resend at the drain, with its wait from then', () => {
  const d = pausedWithWindow(3);
  d.drain('a');
  d.due('a'); // rewinds; the resend's fetch is in flight
  d.take(d.m.pause('a'));
  d.answer(); // read while paused: nothing goes out
  assert.deepEqual(d.brief('a'), []);
  d.due('a');
  d.drain('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 1 r', 'msg 2 r', 'msg 3 r']);
  assert.equal(d.timers.get('a'), CONFIG.backoffMs[0]);
});

test('a drain with nothing awaiting an ack arms no timer', () => {
  const d = pausedWithWindow(3);
  d.ack('a', 3);
  d.settle();
  assert.equal(d.timers.get('a'), null);
  assert.deepEqual(d.drain('a').filter((e) => e.kind === 'timer'), []);
});
