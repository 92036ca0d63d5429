/**
 * StreamFollower.offerRecovered (src/streams/follower.ts): an entry read again from the
 * stream after the node's reader lost some (a channel's refill once its Pub/Sub
 * connection is back) goes out only when newer than the last one sent, and during a
 * catch-up takes its place by ID among the queued live entries.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StreamFollower } from '../../src/streams/follower.js';

const e = (id: string): { id: string } => ({ id });

function follower(): { f: StreamFollower<{ id: string }>; sent: string[] } {
  const sent: string[] = [];
  return { f: new StreamFollower<{ id: string }>({ sendEntry: (x) => sent.push(x.id) }), sent };
}

test('a settled follower sends a recovered entry only when it is newer than the last one sent', () => {
  const { f, sent } = follower();
  f.hold();
  f.startAfter('5-0');
  f.release();
  f.offer(e('6-0'));
  f.offerRecovered(e('4-0'));
  f.offerRecovered(e('6-0'));
  f.offerRecovered(e('7-0'));
  f.offer(e('8-0'));
  assert.deepEqual(sent, ['6-0', '7-0', '8-0']);
});

test('during a catch-up recovered entries are merged in ID order with the queued live ones, none twice', async () => {
  const { f, sent } = follower();
  let offered = false;
  await f.catchUp('0-0', async (after) => {
    if (!offered) {
      offered = true;
      f.offer(e('5-0'));
      f.offer(e('7-0'));
      f.offerRecovered(e('4-0'));
      f.offerRecovered(e('5-0'));
      f.offerRecovered(e('6-0'));
    }
    // The history: 1-0 and 3-0 (the rest trimmed).
    return after === '0-0' ? [e('1-0'), e('3-0')] : [];
  });
  assert.deepEqual(sent, ['1-0', '3-0', '4-0', '5-0', '6-0', '7-0']);
});
