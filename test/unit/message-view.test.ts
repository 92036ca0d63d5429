/**
 * The gaps of a history page (src/delivery/message-view.ts `addGap`, docs/api.md): the
 * seqs that cannot be delivered, a trimmed range and then each unreadable entry, are
 * answered as ranges, adjacent ones merged into one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addGap, type SeqGap } from '../../src/delivery/message-view.js';

test('addGap merges a missing seq into the gap it adjoins, and starts a new gap after a seq that is not missing', () => {
  const gaps: SeqGap[] = [];
  addGap(gaps, 1, 4); // trimmed away
  addGap(gaps, 5, 5); // expired, right after the trimmed range
  addGap(gaps, 6, 6);
  addGap(gaps, 8, 8); // 7 was readable
  addGap(gaps, 9, 9);
  assert.deepEqual(gaps, [{ from: 1, to: 6 }, { from: 8, to: 9 }]);
});
