/**
 * Content read ahead that expires while it waits for a window to free up goes out as an
 * `expired` gap, never as the message (src/delivery/connection-state.ts `deliverPage`,
 * MachineConfig `now`; docs/protocol.md, message `ttl`). A black-box tester's finding:
 * with a device's window full, a message of `ttl: 1` read ahead behind it was sent 7 s
 * past its expiry when the device acked, while a device connecting then got a gap for
 * it and `GET /v1/messages/{id}` answered 404. Driven by hand with no I/O
 * (machine-driver.ts), the clock given to the machine.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CONFIG, Driver } from './machine-driver.js';

/**
 * A driver whose machine judges expiry by `d.inbox.nowMs` (1,000 now), window 2, whose
 * connection `a` got seqs 1 and 2 of 4, seq 3 expiring at 5,000: 3 and 4 wait in the
 * read-ahead.
 */
function windowFullBeforeExpiry(): Driver {
  const d: Driver = new Driver({ ...CONFIG, window: 2, now: () => d.inbox.nowMs });
  d.inbox.nowMs = 1_000;
  d.inbox.append(4);
  d.inbox.expiresAt(3, 5_000);
  d.login('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'msg 2']);
  return d;
}

test('a message read ahead that expired before its window had room is sent as an expired gap; the next one as a message', () => {
  const d = windowFullBeforeExpiry();
  d.inbox.nowMs = 12_000;
  d.ack('a', 2);
  d.settle();
  assert.deepEqual(d.brief('a'), ['gap 3-3 expired', 'msg 4']);
});

test('the same message still within its ttl when the window frees up is sent as a message', () => {
  const d = windowFullBeforeExpiry();
  d.inbox.nowMs = 4_999;
  d.ack('a', 2);
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 3', 'msg 4']);
});

test('a message read ahead whose expiry is exactly the time of the sending is an expired gap, as the store counts it', () => {
  // Mutant killed: `record.expiresAt <= nowMs` → `<` in deliverPage: at the very ms of
  // its expiry the message was sent, while the store's read (message-store.ts, `expiresAt
  // <= now`) and GET /v1/messages/{id} already called it gone.
  const d = windowFullBeforeExpiry();
  d.inbox.nowMs = 5_000;
  d.ack('a', 2);
  d.settle();
  assert.deepEqual(d.brief('a'), ['gap 3-3 expired', 'msg 4']);
});
