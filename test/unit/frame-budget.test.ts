/**
 * One connection's frame budgets (src/gateway/frame-limits.ts FrameBudget) against the
 * numbers docs/protocol.md gives clients ("Client → server" and the 4003 row): 300
 * frames other than `ack` in a 30 s window that starts at the first of them, the
 * delivery window once per sending (the first and each redelivery round) plus 300 acks that move no cursor (refused ones included) in 30 s, one more per msg sent, 20 malformed frames in the
 * connection's life, 64 frames held. The numbers are written out, not read from the
 * module: a client is built to the documented ones. The windows' clock
 * (`performance.now`) is moved by hand; the end-to-end closes (4003) on real sockets are
 * test/gateway/control-frames.test.ts and ping-frames.test.ts.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import {
  FrameBudget, MAX_BAD_FRAMES, MAX_CONTROL_FRAMES, MAX_HELD_FRAMES, badFrameLimitReason, controlFrameLimitReason, idleAckAllowance, idleAckLimitReason,
} from '../../src/gateway/frame-limits.js';

/** Freezes `performance.now` (the limiter's clock) at 0; the returned function moves it to `ms`. */
function handClock(t: TestContext): (ms: number) => void {
  let now = 0;
  t.mock.method(performance, 'now', () => now);
  return (ms) => { now = ms; };
}

/**
 * After a full window: `take` is refused with `reason` to the window's last ms (the
 * clock at 0 is its first frame), and allowed again once 30 s have passed.
 */
function refusedToTheWindowsEnd(take: () => string | undefined, reason: string, at: (ms: number) => void): void {
  assert.equal(take(), reason);
  at(29_999);
  assert.equal(take(), reason, 'the window has not ended');
  at(30_000);
  assert.equal(take(), undefined, 'a new window');
}

/** Takes `n` from one of the budget's limiters; fails on the first refused. */
function takeAll(take: () => string | undefined, n: number): void {
  for (let i = 1; i <= n; i++) assert.equal(take(), undefined, `frame ${i} of ${n} is within the budget`);
}

test('the limits are the documented ones: 300 frames other than ack per 30 s, 20 malformed frames, 64 held', () => {
  assert.equal(MAX_CONTROL_FRAMES, 300);
  assert.equal(MAX_BAD_FRAMES, 20);
  assert.equal(MAX_HELD_FRAMES, 64);
  assert.equal(controlFrameLimitReason, 'more than 300 frames other than ack in 30 s');
  assert.equal(idleAckAllowance(100, 3), 700, 'the default window of 100, sent and resent by three redelivery rounds, plus 300');
  assert.equal(idleAckLimitReason(700), 'more than 700 acks that moved no cursor in 30 s');
  assert.equal(idleAckLimitReason(700, 100), 'more than 800 acks that moved no cursor in 30 s (700 + 100 for msgs sent)', 'the limit applied after 100 msgs');
});

test('300 frames other than ack pass and the 301st is refused until 30 s after the first, not before', (t) => {
  const at = handClock(t);
  const budget = new FrameBudget(700);
  takeAll(() => budget.control(), 300);
  refusedToTheWindowsEnd(() => budget.control(), controlFrameLimitReason, at);
});

test('acks that move no cursor have their allowance per 30 s, apart from the frames other than ack', (t) => {
  const at = handClock(t);
  const budget = new FrameBudget(idleAckAllowance(5, 1));
  takeAll(() => budget.control(), 300);
  takeAll(() => budget.idleAck(), 310);
  refusedToTheWindowsEnd(() => budget.idleAck(), idleAckLimitReason(310), at);
});

test('the 21st malformed frame is refused, however long after the first: they count over the connection\'s life', (t) => {
  const at = handClock(t);
  const budget = new FrameBudget(700);
  takeAll(() => budget.badFrame(), 20);
  at(3_600_000);
  assert.equal(budget.badFrame(), badFrameLimitReason);
});

test('a frame at 0 s and 299 at 28 s, then 300 at 31 s: the second window is whole (a window, not a bucket refilled over time)', (t) => {
  const at = handClock(t);
  const budget = new FrameBudget(700);
  takeAll(() => budget.control(), 1);
  at(28_000);
  takeAll(() => budget.control(), 299);
  at(31_000);
  takeAll(() => budget.control(), 300);
  assert.equal(budget.control(), controlFrameLimitReason);
});

test('each msg sent allows one more ack that moves nothing (a second ack of it), at most the inbox cap plus the allowance held at once', (t) => {
  handClock(t);
  const budget = FrameBudget.of({ deliveryWindow: 5, redeliveryBackoffMs: [1000], inboxCap: 990 });
  takeAll(() => budget.idleAck(), 310);
  assert.equal(budget.idleAck(), idleAckLimitReason(310));
  for (let i = 0; i < 3; i++) budget.earn();
  takeAll(() => budget.idleAck(), 3);
  assert.equal(budget.idleAck(), idleAckLimitReason(310, 3), 'three msgs, three more');
  for (let i = 0; i < 2000; i++) budget.earn();
  takeAll(() => budget.idleAck(), 1300);
  assert.equal(budget.idleAck(), idleAckLimitReason(310, 1303), 'earned up to 990 + 310, not 2,000');
});

// The walk14 tester's F4: after 100 msgs, 800 acks of 0 passed and the 801st was closed
// "more than 700 acks …". The reason names the limit applied in the 30 s it ran out in.
test('the close reason names the limit applied: the allowance plus the acks msgs allowed that were spent in those 30 s', (t) => {
  const at = handClock(t);
  const budget = FrameBudget.of({ deliveryWindow: 100, redeliveryBackoffMs: [10_000, 2_000, 4_000], inboxCap: 10_000 });
  for (let i = 0; i < 100; i++) budget.earn();
  takeAll(() => budget.idleAck(), 800);
  assert.equal(budget.idleAck(), 'more than 800 acks that moved no cursor in 30 s (700 + 100 for msgs sent)');
  // 30 s on, a new window: earned acks spent in the window before are not named again.
  at(30_000);
  for (let i = 0; i < 5; i++) budget.earn();
  takeAll(() => budget.idleAck(), 705);
  assert.equal(budget.idleAck(), 'more than 705 acks that moved no cursor in 30 s (700 + 5 for msgs sent)');
  at(60_000);
  takeAll(() => budget.idleAck(), 700);
  assert.equal(budget.idleAck(), 'more than 700 acks that moved no cursor in 30 s', 'none earned: the allowance alone');
});

test('acks that move no cursor are one window from the first of them, paid for by a msg or not: the allowance is whole again 30 s after it', (t) => {
  const at = handClock(t);
  const budget = FrameBudget.of({ deliveryWindow: 100, redeliveryBackoffMs: [10_000, 2_000, 4_000], inboxCap: 10_000 });
  for (let i = 0; i < 50; i++) budget.earn();
  // The window begins at 0 s with acks the msgs paid for; the allowance is spent at 20 s.
  takeAll(() => budget.idleAck(), 50);
  at(20_000);
  takeAll(() => budget.idleAck(), 700);
  assert.equal(budget.idleAck(), 'more than 750 acks that moved no cursor in 30 s (700 + 50 for msgs sent)');
  // 30 s after the first of them, not after the first the allowance paid for.
  at(30_000);
  takeAll(() => budget.idleAck(), 700);
  assert.equal(budget.idleAck(), idleAckLimitReason(700));
});
