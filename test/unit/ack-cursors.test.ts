/**
 * The ack cursors a user's session holds until the next round of writes
 * (src/delivery/ack-cursors.ts, DESIGN.md §5 "Ack cursors are persisted … coalesced"):
 * what is written for a device when several acks of it are held between two rounds.
 * The inbox is a stand-in that records the writes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Inbox } from '../../src/inbox/inbox.js';
import { AckCursors } from '../../src/delivery/ack-cursors.js';
import { AckRounds } from '../../src/delivery/ack-rounds.js';
import { createLogger } from '../../src/logger.js';

/** Cursors of user `u` on an inbox stand-in whose `ack` writes are recorded as `device seq epoch`. */
function cursors(): { acks: AckCursors; writes: string[] } {
  const writes: string[] = [];
  const inbox = {
    ack: async (_u: string, device: string, seq: number, epoch?: string): Promise<number> => {
      writes.push(`${device} ${seq} ${epoch ?? '-'}`);
      return seq;
    },
  } as unknown as Inbox;
  // Rounds an hour apart: only the explicit flushAcks writes.
  const acks = new AckCursors('u', { inbox, logger: createLogger('silent'), retryMs: 60_000 }, new AckRounds(3_600_000));
  return { acks, writes };
}

test('a lower ack of the same epoch held after a higher one does not move the cursor to be written back', async () => {
  // Mutant killed: hold replacing the held ack on any other seq (`held.seq < ack.seq` →
  // `!==`): a device's second connection acking the seq it resumed at (5, the `store`
  // outcome) before the round replaced the 10 its first one acked, and the device's
  // stored cursor was written as 5: a plain reconnect was sent 6..10 again.
  const { acks, writes } = cursors();
  acks.hold('phone', { seq: 10, epoch: 'A' });
  acks.hold('phone', { seq: 5, epoch: 'A' });
  acks.hold('tablet', { seq: 3, epoch: 'A' });
  await acks.flushAcks();
  assert.deepEqual(writes.sort(), ['phone 10 A', 'tablet 3 A']);
  assert.equal(acks.holds, false);
});

test('an ack of a newer epoch replaces a higher one held of the epoch before', async () => {
  const { acks, writes } = cursors();
  acks.hold('phone', { seq: 10, epoch: 'A' });
  acks.hold('phone', { seq: 2, epoch: 'B' });
  await acks.flushAcks();
  assert.deepEqual(writes, ['phone 2 B']);
});
