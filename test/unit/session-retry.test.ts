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
import { createLogger } from '../../src/logger.js';
import { waitUntil } from '../harness/checks.js';
import { CONFIG } from './machine-driver.js';

const RETRY_MS = 20;

/** A session whose inbox reads each wait for the test to fail them. */
function sessionWithFailingReads(): { session: UserSession; reads: Array<(err: Error) => void> } {
  const reads: Array<(err: Error) => void> = [];
  const inbox = {
    range: () => new Promise((_resolve, reject) => { reads.push(reject); }),
  } as unknown as Inbox;
  const store: RecordReader = { isOpen: true, get: async () => null, getMany: async () => [] };
  const session = new UserSession('u', {
    inbox, store, machine: CONFIG, logger: createLogger('silent'), retryMs: RETRY_MS,
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
