/**
 * StreamFollower, a catch-up whose page read fails: the entries after the last one it
 * sent were not read, so the next entry the connection gets (a live one) is preceded by
 * a gap from there, and nothing it sent is sent again.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StreamFollower } from '../../src/streams/follower.js';

function recording(): { follower: StreamFollower<{ id: string }>; sent: string[] } {
  const sent: string[] = [];
  return { follower: new StreamFollower({ sendEntry: (e) => sent.push(e.id), sendGap: (from, to) => sent.push(`gap ${from}..${to}`) }), sent };
}

test('a catch-up whose second page read fails: a gap from the last entry sent before the next one', async () => {
  const { follower, sent } = recording();
  follower.hold();
  await assert.rejects(follower.catchUp('0-0', async (after) => {
    if (after === '0-0') return [{ id: '1-0' }, { id: '2-0' }];
    // 3-0 … 7-0 are in the stream, but this read fails; 8-0 arrives live meanwhile.
    follower.offer({ id: '8-0' });
    throw new Error('redis down');
  }), /redis down/);
  follower.offer({ id: '9-0' });
  assert.deepEqual(sent, ['1-0', '2-0', 'gap 2-0..8-0', '8-0', '9-0']);
});

test('a catch-up that could not begin (releaseUnread): a gap from afterId before the next entry; nothing at or before it sent', () => {
  const { follower, sent } = recording();
  follower.hold();
  follower.offer({ id: '3-0' });
  follower.offer({ id: '6-0' });
  follower.releaseUnread('4-0');
  follower.offer({ id: '7-0' });
  assert.deepEqual(sent, ['gap 4-0..6-0', '6-0', '7-0']);
});

test('a loss told after a failed catch-up read starts its gap where the connection stopped getting entries', async () => {
  const { follower, sent } = recording();
  follower.hold();
  await assert.rejects(follower.catchUp('0-0', async (after) => {
    if (after === '0-0') return [{ id: '1-0' }];
    throw new Error('redis down');
  }), /redis down/);
  follower.offerLost({ after: '5-0', before: '9-0', lastLost: '8-0' });
  follower.offer({ id: '9-0' });
  assert.deepEqual(sent, ['1-0', 'gap 1-0..9-0', '9-0']);
});

test('a catch-up that could not begin from where the live feed began (releaseUnread with liveFrom): no gap, nothing was left unread', () => {
  // Cursor at where the node's reader was when the connection joined (a client that
  // had every broadcast, its bounds read failing): the live feed brings all after it.
  const at = recording();
  at.follower.hold();
  at.follower.offer({ id: '6-0' });
  at.follower.releaseUnread('5-0', '5-0');
  at.follower.offer({ id: '7-0' });
  assert.deepEqual(at.sent, ['6-0', '7-0']);
  // Past it: the same, and nothing at or before the cursor is sent.
  const past = recording();
  past.follower.hold();
  past.follower.offer({ id: '6-0' });
  past.follower.offer({ id: '8-0' });
  past.follower.releaseUnread('6-0', '5-0');
  assert.deepEqual(past.sent, ['8-0']);
  // Before it: what lay between the cursor and the live feed was not read, a gap.
  const before = recording();
  before.follower.hold();
  before.follower.offer({ id: '6-0' });
  before.follower.releaseUnread('4-0', '5-0');
  assert.deepEqual(before.sent, ['gap 4-0..6-0', '6-0']);
});

test('after releaseUnread past where a lagging live feed is, live entries at or before the cursor that the reader hands out later are not sent', () => {
  // The node's reader is at 5-0 and lags; the client was sent up to 20-0 before.
  const { follower, sent } = recording();
  follower.hold();
  follower.releaseUnread('20-0', '5-0');
  for (const id of ['6-0', '20-0', '21-0', '22-0']) follower.offer({ id });
  assert.deepEqual(sent, ['21-0', '22-0']);
});
