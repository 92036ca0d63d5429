/**
 * The per-user token buckets of src/gateway/user-rate.ts on a clock of the test's own:
 * a burst then the sustained rate, the `Retry-After` they give, memory dropped once a
 * bucket is full again, and the handshake defaults against the back-off
 * docs/protocol.md asks of clients (Close codes, "Back-off").
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { UserRates, overRate } from '../../src/gateway/user-rate.js';
import { SETTINGS } from '../../src/config/settings.js';

/** A clock the test moves, ms. */
function clock(): { now: () => number; advance: (ms: number) => void } {
  let t = 1_000;
  return { now: () => t, advance: (ms) => { t += ms; } };
}

test('a user gets the burst at once, then one a second at 60 a minute; a refusal takes nothing and says when the next comes', () => {
  const c = clock();
  const rates = new UserRates({ burst: 3, perMinute: 60 }, { now: c.now });
  assert.deepEqual([rates.take('u'), rates.take('u'), rates.take('u')], [0, 0, 0]);
  assert.equal(rates.take('u'), 1);
  // Another user has a bucket of their own.
  assert.equal(rates.take('v'), 0);
  c.advance(400);
  // Refused again: refusals take no token, so the one due at 1 s still comes then.
  assert.equal(rates.take('u'), 1);
  c.advance(600);
  assert.equal(rates.take('u'), 0);
  assert.equal(rates.take('u'), 1);
  // A slow refill: 2 a minute is one each 30 s.
  const slow = new UserRates({ burst: 1, perMinute: 2 }, { now: c.now });
  assert.equal(slow.take('u'), 0);
  assert.equal(slow.take('u'), 30);
  // Part of the way: the wait left is rounded up (19.5 s is 20), so a client that
  // waits as told is never refused again.
  c.advance(10_500);
  assert.equal(slow.take('u'), 20);
  c.advance(19_000);
  assert.equal(slow.take('u'), 1);
  c.advance(1_000);
  assert.equal(slow.take('u'), 0, 'taken once the Retry-After given at 10.5 s has passed');
});

test('a bucket idle long enough to be full again is forgotten; the users kept never pass the bound', () => {
  const c = clock();
  const rates = new UserRates({ burst: 10, perMinute: 60 }, { now: c.now, maxUsers: 50 });
  for (let i = 0; i < 40; i++) rates.take(`u${i}`);
  assert.equal(rates.size, 40);
  // 10 s fills an empty bucket: all 40 are dropped at the next use.
  c.advance(10_000);
  rates.take('fresh');
  assert.equal(rates.size, 1);
  for (let i = 0; i < 500; i++) rates.take(`w${i}`);
  assert.equal(rates.size, 50);
  // A forgotten user starts again with a full bucket, as an idle one would.
  for (let i = 0; i < 10; i++) assert.equal(rates.take('w0'), 0);
  assert.equal(rates.take('w0'), 1);
});

test('the refusal is 429 RATE_LIMITED with its Retry-After, naming the limit and its settings', () => {
  const err = overRate('WebSocket handshakes', { burst: 30, perMinute: 60 }, 1, 'PIXIU_CONNECT_BURST, PIXIU_CONNECT_RATE');
  assert.equal(err.status, 429);
  assert.equal(err.code, 'RATE_LIMITED');
  assert.equal(err.retryAfterSeconds, 1);
  assert.equal(err.message, 'too many WebSocket handshakes for this user on this node (a burst of 30, then 1 a second: PIXIU_CONNECT_BURST, PIXIU_CONNECT_RATE); retry after 1 s');
  assert.match(overRate('x', { burst: 1, perMinute: 2 }, 30).message, /then 2 a minute\); retry after 30 s$/);
});

/**
 * The times of one device's handshakes when every one fails at once (the worst case
 * for the limit) and it follows the documented back-off at the shortest waits its
 * jitter allows: after a 1001 a first wait of 0.2 s (0.2 – 2 s), else none; then 0.5 s
 * doubling up to 30 s, each at least half of it. It never resets: that takes a
 * connection open a minute.
 */
function backOffSchedule(startMs: number, endMs: number, after1001: boolean): number[] {
  const times: number[] = [];
  let at = startMs + (after1001 ? 200 : 0);
  let wait = 500;
  while (at <= endMs) {
    times.push(at);
    at += wait / 2;
    wait = Math.min(wait * 2, 30_000);
  }
  return times;
}

test('with the default handshake limit, a user\'s 5 devices following the documented back-off are never refused, whatever fails them', () => {
  const limit = { burst: SETTINGS.connectBurst.default, perMinute: SETTINGS.connectRatePerMinute.default };
  const devices = SETTINGS.maxConnectionsPerUser.default;
  for (const after1001 of [false, true]) {
    const c = clock();
    const rates = new UserRates(limit, { now: () => c.now() });
    // Every device fails together, for 10 minutes, starting at the same instant.
    const attempts = Array.from({ length: devices }, () => backOffSchedule(0, 600_000, after1001)).flat().sort((a, b) => a - b);
    let last = 0;
    for (const at of attempts) {
      c.advance(at - last);
      last = at;
      assert.equal(rates.take('u'), 0, `refused at ${at} ms (${after1001 ? 'after a 1001' : 'from the start'})`);
    }
    assert.ok(attempts.length >= devices * 25);
  }
  // A loop without back-off is refused: the same devices reconnecting every 150 ms
  // (a hostile-client tester's loop) get in at 1 a second once the burst is spent.
  const c = clock();
  const rates = new UserRates(limit, { now: c.now });
  let admitted = 0;
  for (let i = 0; i < 20_000 / 150; i++) {
    for (let d = 0; d < devices; d++) if (rates.take('u') === 0) admitted++;
    c.advance(150);
  }
  assert.ok(admitted <= limit.burst + 21, `${admitted} handshakes admitted in 20 s`);
});
