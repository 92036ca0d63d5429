/**
 * What a channel's refill tells lost (src/channels/channel-refill.ts `refillLoss`): once
 * the node's Pub/Sub connection is back, a history page read after `after` when the
 * history had trimmed past it is a loss — less what the refill's hold has (every live
 * publication from its first on) — handed to each subscriber's follower, which sends a
 * `gap` unless it had everything lost (docs/protocol.md "Channels"). So is what a full
 * hold dropped that the refill did not read (`holdLoss`).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Hold, holdLoss, readHistory, refillLoss } from '../../src/channels/channel-refill.js';
import type { ChannelEntry, ChannelStream, HistoryPage } from '../../src/channels/channel-stream.js';
import { StreamFollower } from '../../src/streams/follower.js';

const entry = (id: string): ChannelEntry => ({ id, frame: id });

function page(lastTrimmed: string, ids: readonly string[]): HistoryPage {
  return { entries: ids.map(entry), readUpTo: ids.at(-1), lastTrimmed };
}

test('trimmed past the cursor, nothing held: lost from the cursor up to the newest trimmed, before the page\'s first', () => {
  assert.deepEqual(refillLoss('10-0', page('12-0', ['13-0', '14-0']), []), { after: '10-0', before: '13-0', lastLost: '12-0' });
  // Held publications newer than the trim change nothing: the history has them too.
  assert.deepEqual(refillLoss('10-0', page('12-0', ['13-0', '14-0']), [entry('14-0')]), { after: '10-0', before: '13-0', lastLost: '12-0' });
});

test('the trim reached into the hold: lost only up to the first held publication, which goes out after the gap', () => {
  assert.deepEqual(refillLoss('10-0', page('15-0', ['16-0']), [entry('13-0'), entry('14-0'), entry('16-0')]),
    { after: '10-0', before: '13-0', lastLost: '12-18446744073709551615' });
  assert.deepEqual(refillLoss('10-0', page('15-3', ['16-0']), [entry('15-2')]), { after: '10-0', before: '15-2', lastLost: '15-1' });
  // Held ones at or before the cursor were offered already: the first after it counts.
  assert.deepEqual(refillLoss('10-0', page('12-0', ['13-0']), [entry('9-0'), entry('11-0')]), { after: '10-0', before: '11-0', lastLost: '10-18446744073709551615' });
});

test('no loss when the hold begins right after the cursor, or when nothing is retained to tell it before', () => {
  assert.equal(refillLoss('10-0', page('12-0', ['13-0']), [entry('10-1')]), undefined);
  assert.equal(refillLoss('10-0', { entries: [], readUpTo: undefined, lastTrimmed: '12-0' }, []), undefined);
});

test('nothing retained after the cursor (an operator\'s XDEL of the newest): the loss goes before the first held publication', () => {
  assert.deepEqual(refillLoss('10-0', { entries: [], readUpTo: undefined, lastTrimmed: '12-0' }, [entry('14-0')]), { after: '10-0', before: '14-0', lastLost: '12-0' });
});

test('a page of only entries another writer left malformed: the loss goes before the last of them, which no pub carries', () => {
  assert.deepEqual(refillLoss('10-0', { entries: [], readUpTo: '14-0', lastTrimmed: '12-0' }, [entry('16-0')]), { after: '10-0', before: '14-0', lastLost: '12-0' });
});

test('a subscriber\'s follower told the loss sends a gap from where it was to the first kept, then the held and refilled ones; one that had them all sends none', () => {
  const frames: string[] = [];
  const at = (position: string): StreamFollower<ChannelEntry> => {
    const f = new StreamFollower<ChannelEntry>({ sendEntry: (e) => frames.push(`${position}: ${e.id}`), sendGap: (from, to) => frames.push(`${position}: gap ${from} ${to}`) });
    f.hold();
    f.startAfter(position);
    f.release();
    return f;
  };
  const behind = at('10-0');
  const ahead = at('13-5');
  const loss = refillLoss('10-0', page('15-0', ['16-0']), [entry('13-0'), entry('14-0')]);
  assert.ok(loss);
  for (const f of [behind, ahead]) {
    f.offerLost(loss);
    for (const id of ['13-0', '14-0', '16-0']) f.offerRecovered(entry(id));
  }
  assert.deepEqual(frames, ['10-0: gap 10-0 13-0', '10-0: 13-0', '10-0: 14-0', '10-0: 16-0', '13-5: 14-0', '13-5: 16-0']);
});

test('readHistory answers the last entry it read, also when it stops at upTo part-way through a page', async () => {
  // Pages of three after the cursor; `upTo` falls inside the second page.
  const ids = ['11-0', '12-0', '13-0', '14-0', '15-0', '16-0'];
  const stream = {
    range: async (_channel: string, after: string, _count: number): Promise<HistoryPage> => {
      const rest = ids.filter((id) => id > after).slice(0, 3);
      return page('0-0', rest);
    },
  } as unknown as ChannelStream;
  const fed: string[] = [];
  const feed = { entry: (e: ChannelEntry) => fed.push(e.id), trimmed: () => assert.fail('nothing trimmed') };
  // What #release compares a full hold's drops with: "14-0", not the first page's end.
  assert.equal(await readHistory(stream, 'c', '10-0', '14-0', () => true, feed), '14-0');
  assert.deepEqual(fed, ['11-0', '12-0', '13-0', '14-0']);
  fed.length = 0;
  assert.equal(await readHistory(stream, 'c', '10-0', '99-0', () => true, feed), '16-0');
  assert.equal(await readHistory(stream, 'c', '16-0', '99-0', () => true, feed), '16-0', 'nothing after: the cursor');
});

/** A hold that kept `kept` and dropped up to `dropped` (undefined: nothing). */
function holdOf(kept: readonly string[], dropped?: string): Hold {
  const hold = new Hold();
  hold.entries.push(...kept.map(entry));
  hold.droppedUpTo = dropped;
  return hold;
}

test('a full hold\'s drops the refill did not read are lost from what it read to the first kept; none when it read past them', () => {
  assert.deepEqual(holdLoss(holdOf(['21-0', '22-0'], '20-0'), '15-0'), { after: '15-0', before: '21-0', lastLost: '20-0' });
  assert.equal(holdLoss(holdOf(['21-0', '22-0'], '20-0'), '20-0'), undefined, 'read up to the newest dropped');
  assert.equal(holdLoss(holdOf(['21-0', '22-0'], '20-0'), '20-5'), undefined);
});

test('a refill that read nothing tells a full hold\'s drops from 0-0 (each follower narrows it to its own position)', () => {
  assert.deepEqual(holdLoss(holdOf(['21-0'], '20-0'), undefined), { after: '0-0', before: '21-0', lastLost: '20-0' });
});

test('no hold loss when the hold dropped nothing, holds nothing now, or is gone', () => {
  assert.equal(holdLoss(holdOf(['21-0']), undefined), undefined);
  assert.equal(holdLoss(holdOf([], '20-0'), undefined), undefined);
  assert.equal(holdLoss(undefined, '15-0'), undefined);
});
