/**
 * A user session's retry of a failed inbox read (src/delivery/session.ts): the read is
 * retried after `retryMs` while the user has a connection here, and not at all once the
 * last one closed while it ran (the retry would read for nobody, and its timer held a
 * stopping process up to 4 × `retryMs`). The inbox here is a stand-in whose reads the
 * test fails by hand; the machine and the session are the real ones.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Inbox } from '../../src/inbox/inbox.js';
import type { RecordReader } from '../../src/store/record-reader.js';
import { AckRounds } from '../../src/delivery/ack-rounds.js';
import { UserSession, type DeliveryConnection } from '../../src/delivery/session.js';
import { MAX_RETRY_FACTOR } from '../../src/delivery/retry-backoff.js';
import { createLogger } from '../../src/logger.js';
import { waitUntil } from '../harness/checks.js';
import { CONFIG } from './machine-driver.js';

const RETRY_MS = 20;

/** A session whose inbox reads each wait for the test to fail them; its retry waits `retryMs`. */
function sessionWithFailingReads(retryMs = RETRY_MS): { session: UserSession; reads: Array<(err: Error) => void> } {
  const reads: Array<(err: Error) => void> = [];
  const inbox = {
    range: () => new Promise((_resolve, reject) => { reads.push(reject); }),
  } as unknown as Inbox;
  const store: RecordReader = { isOpen: true, get: async () => null, getMany: async () => [] };
  const session = new UserSession('u', {
    inbox, store, machine: CONFIG, logger: createLogger('silent'), retryMs,
  }, new AckRounds(100));
  return { session, reads };
}

const conn = (id: string): DeliveryConnection => ({ id, device: id, send: () => undefined, close: () => undefined });

test('a failed read is retried while a connection is open', async () => {
  const { session, reads } = sessionWithFailingReads();
  session.login(conn('a'), { kind: 'first' });
  assert.equal(reads.length, 1);
  reads[0]?.(new Error('redis down'));
  await waitUntil('the retry reads again', async () => reads.length === 2, 5000, 5);
  session.logout('a');
});

/** Timers keeping the process alive now. */
const liveTimers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

test('a read that fails after the last connection closed arms no retry', async () => {
  const { session, reads } = sessionWithFailingReads();
  session.login(conn('a'), { kind: 'first' });
  assert.equal(session.logout('a'), true);
  const before = liveTimers();
  reads[0]?.(new Error('redis down'));
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(liveTimers(), before, 'no retry timer for a user with no connection');
  assert.equal(reads.length, 1);
});

test('the retry wait doubles with each failure in a row, up to MAX_RETRY_FACTOR × retryMs (Node mock timers)', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const { session, reads } = sessionWithFailingReads();
  session.login(conn('a'), { kind: 'first' });
  /** Lets the session's catch of a failed read run (it arms the retry timer). */
  const settled = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
  const factors: number[] = [];
  for (let failure = 1; failure <= 4; failure++) {
    assert.equal(reads.length, failure);
    reads[failure - 1]?.(new Error('redis down'));
    await settled();
    // Tick 1 ms at a time until the retry reads again: the wait, in retryMs.
    let waited = 0;
    while (reads.length === failure) {
      assert.ok(waited < 10 * RETRY_MS * MAX_RETRY_FACTOR, 'the retry never came');
      t.mock.timers.tick(1);
      waited += 1;
      await settled();
    }
    factors.push(waited / RETRY_MS);
  }
  assert.deepEqual(factors, [1, 2, 4, MAX_RETRY_FACTOR]);
  session.logout('a');
});

test('the retry armed by a failed read is cancelled when the last connection closes: no timer holds a stopping process', async () => {
  // A retry a minute away: on a busy machine the five turns below took longer than
  // 20 ms, the retry ran before the logout, and no timer was left to clear.
  const { session, reads } = sessionWithFailingReads(60_000);
  session.login(conn('a'), { kind: 'first' });
  reads[0]?.(new Error('redis down'));
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  // Counted right around the logout (synchronous: no other test's timer can run out
  // in between): the one timer the session holds, its retry, goes with it.
  const before = liveTimers();
  assert.equal(session.logout('a'), true);
  assert.equal(liveTimers(), before - 1, 'the retry timer is cleared with the last connection');
  assert.equal(reads.length, 1);
});
