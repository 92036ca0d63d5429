/**
 * A page cut by bytes counts its `gap` frames (connection-state.ts `deliverPage`): they
 * are written to the socket as its `msg` frames are. Before, only `msg` frames were
 * summed against the connection's byte allowance, so a page of messages between expired
 * seqs passed it by its gaps (pausetidy 5).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { GapFrame, MsgFrame } from '../../src/delivery/frames.js';
import { gapFrameSize, msgFrameSize } from '../../src/delivery/msg-frame-bytes.js';
import { CONFIG, Driver, briefOf } from './machine-driver.js';

/** A driver (window 10: one page of all) whose inbox holds seqs 1..7, the content of 2, 4 and 6 expired: msg, gap, msg, … */
function withExpiredBetween(allowance?: number): Driver {
  const d = new Driver({ ...CONFIG, window: 10 }, { allowance });
  d.inbox.append(7);
  d.inbox.expire(2, 4, 6);
  d.login('a');
  d.settle();
  return d;
}

test('a page stops at the message whose frames, the gaps before it included, reach the byte allowance', () => {
  // Uncut (no allowance): every seq.
  const frames = withExpiredBetween().frames('a');
  assert.deepEqual(frames.map(briefOf), ['welcome 1', 'msg 1', 'gap 2-2 expired', 'msg 3', 'gap 4-4 expired', 'msg 5', 'gap 6-6 expired', 'msg 7']);
  const [, m1, g2, m3] = frames as [unknown, MsgFrame, GapFrame, MsgFrame];
  // The allowance is what msg 1, gap 2 and msg 3 take: reached at msg 3 only with the
  // gap counted (without, at msg 5).
  const allowance = msgFrameSize(m1) + gapFrameSize(g2) + msgFrameSize(m3);
  const cut = withExpiredBetween(allowance);
  assert.deepEqual(cut.brief('a'), ['welcome 1', 'msg 1', 'gap 2-2 expired', 'msg 3'], 'cut after msg 3');
  assert.equal(cut.holds, 1, 'held until its writes drain');
  cut.drain('a');
  cut.settle();
  assert.deepEqual(cut.brief('a'), ['gap 4-4 expired', 'msg 5', 'gap 6-6 expired', 'msg 7'], 'the rest follows the drain');
});
