/**
 * The gaps of a history page (src/delivery/message-view.ts `addGap`, docs/api.md): the
 * seqs that cannot be delivered, a trimmed range and then each unreadable entry, are
 * answered as ranges, adjacent ones merged into one only when missing for the same
 * reason (docs/protocol.md "Why a gap").
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addGap, type SeqGap } from '../../src/delivery/message-view.js';

test('addGap merges a missing seq into the gap it adjoins, and starts a new gap after a seq that is not missing', () => {
  const gaps: SeqGap[] = [];
  addGap(gaps, 1, 4, 'trimmed'); // trimmed away
  addGap(gaps, 5, 5, 'trimmed'); // deleted by hand, right after the trimmed range
  addGap(gaps, 6, 6, 'expired'); // expired: another reason, another gap
  addGap(gaps, 7, 7, 'expired');
  addGap(gaps, 9, 9, 'expired'); // 8 was readable
  addGap(gaps, 10, 10, 'undeliverable');
  addGap(gaps, 11, 11, 'expired');
  assert.deepEqual(gaps, [
    { from: 1, to: 5, reason: 'trimmed' },
    { from: 6, to: 7, reason: 'expired' },
    { from: 9, to: 9, reason: 'expired' },
    { from: 10, to: 10, reason: 'undeliverable' },
    { from: 11, to: 11, reason: 'expired' },
  ]);
});
