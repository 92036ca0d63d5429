/**
 * A delivery stall's `stalledMs` (src/delivery/stall-log.ts) is measured on a clock that
 * never steps: the test steps the wall clock (`Date`, mocked) as NTP or a resumed VM
 * would, while `performance.now()` goes on untouched, as on a real host (as
 * test/unit/idle-clock-steps.test.ts does for a connection's silence).
 *
 * Before (reread-clock F9), `stalledMs` was `Date.now()` less the stall's start: a step
 * back of an hour during a stall logged `stalledMs` ≈ −3,600,000 on the next
 * `delivery fetch failed, will retry` and on `delivery resumed`, and a step forward a
 * stall an hour longer than it was.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FETCH_FAILED_LOG, RESUMED_LOG, StallLog } from '../../src/delivery/stall-log.js';
import { unavailable } from '../../src/errors.js';
import { capturingLogger } from '../harness/log-capture.js';

const HOUR_MS = 3_600_000;

for (const [way, stepMs] of [['back', -HOUR_MS], ['forward', HOUR_MS]] as const) {
  test(`a step ${way} of the wall clock by an hour during a stall does not move its stalledMs`, (t) => {
    t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
    const { logger, lines } = capturingLogger();
    const stalls = new StallLog('u1', logger);
    stalls.fetchFailed(unavailable('Redis is unavailable, retry later'), 1);
    t.mock.timers.setTime(Date.now() + stepMs);
    stalls.fetchFailed(unavailable('Redis is unavailable, retry later'), 2);
    stalls.resumed(2);
    const logged = lines.map((l) => [l.msg, l.failures]);
    assert.deepEqual(logged, [[FETCH_FAILED_LOG, 1], [FETCH_FAILED_LOG, 2], [RESUMED_LOG, 2]], JSON.stringify(lines));
    for (const line of lines) {
      const stalledMs = line.stalledMs as number;
      assert.ok(stalledMs >= 0 && stalledMs < 60_000, `stalledMs ${stalledMs} on "${String(line.msg)}": the stall lasted a moment`);
    }
  });
}
