/**
 * Pure logic under the broadcast feed (no I/O): stream-ID order, the follower's
 * catch-up-then-live without duplicates or gaps, and tag filters.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compareStreamIds, isStreamId, normalizeStreamId } from '../../src/streams/stream-id.js';
import { MAX_CATCH_UP_QUEUE, StreamFollower } from '../../src/streams/follower.js';
import { matchesFilter } from '../../src/broadcast/filter.js';

test('stream IDs order as pairs of integers of any length, leading zeros ignored', () => {
  const ordered = ['0-0', '0-1', '1-0', '9-99', '10-0', '10-1', '1700000000000-0', '1700000000000-2', '1700000000000-10', '99999999999999999999-0'];
  for (let i = 0; i < ordered.length; i++) {
    for (let j = 0; j < ordered.length; j++) {
      const a = ordered[i] as string;
      const b = ordered[j] as string;
      assert.equal(Math.sign(compareStreamIds(a, b)), Math.sign(i - j), `${a} vs ${b}`);
    }
  }
  assert.equal(compareStreamIds('007-0', '7-0'), 0);
  assert.ok(compareStreamIds('0010-0', '9-5') > 0);
  assert.ok(compareStreamIds('5-010', '5-9') > 0);
  assert.equal(normalizeStreamId('0012-0003'), '12-3');
  assert.equal(normalizeStreamId('0-0'), '0-0');
  assert.equal(normalizeStreamId('000-000'), '0-0');
  assert.throws(() => compareStreamIds('12', '1-0'), TypeError);
  assert.ok(isStreamId('1-0') && !isStreamId('1') && !isStreamId('a-1') && !isStreamId('1-'));
});

/** A follower that records what it sends. */
function recording(): { follower: StreamFollower<{ id: string }>; sent: string[] } {
  const sent: string[] = [];
  return { follower: new StreamFollower({ sendEntry: (e) => sent.push(e.id), sendGap: (from, to) => sent.push(`gap ${from}..${to}`) }), sent };
}

const ids = (...xs: string[]): Array<{ id: string }> => xs.map((id) => ({ id }));

test('a held follower queues live entries and sends them on release', () => {
  const { follower, sent } = recording();
  follower.hold();
  for (const e of ids('5-0', '6-0')) follower.offer(e);
  assert.deepEqual(sent, []);
  assert.equal(follower.settled, false);
  follower.release();
  assert.deepEqual(sent, ['5-0', '6-0']);
  follower.offer({ id: '7-0' });
  assert.deepEqual(sent, ['5-0', '6-0', '7-0']);
  assert.equal(follower.settled, true);
});

test('catch-up then live: entries the catch-up sent are not sent again, nothing is skipped', async () => {
  const { follower, sent } = recording();
  follower.hold();
  const stream = ids('1-0', '2-0', '3-0', '4-0', '5-0');
  const reads: string[] = [];
  await follower.catchUp('1-0', async (after) => {
    reads.push(after);
    // While the catch-up reads, the node's reader hands out 4-0 and 5-0 live, and then
    // 6-0 (appended after the catch-up's read).
    if (reads.length === 1) for (const e of ids('4-0', '5-0', '6-0')) follower.offer(e);
    return stream.filter((e) => compareStreamIds(e.id, after) > 0).slice(0, 2);
  });
  assert.deepEqual(reads, ['1-0', '3-0', '5-0']);
  assert.deepEqual(sent, ['2-0', '3-0', '4-0', '5-0', '6-0']);
  // Live again: an entry the catch-up already sent is dropped; then a newer one settles it.
  follower.offer({ id: '6-0' });
  assert.equal(follower.settled, false);
  follower.offer({ id: '7-0' });
  assert.deepEqual(sent, ['2-0', '3-0', '4-0', '5-0', '6-0', '7-0']);
  assert.equal(follower.settled, true);
});

test('a catch-up waits while the connection is paused: it sends on only once whenWritable resolves', async () => {
  const { follower, sent } = recording();
  follower.hold();
  const stream = ids('2-0', '3-0', '4-0', '5-0');
  // Paused after the second entry sent, until the test lets it go on.
  let resume: () => void = () => undefined;
  const resumed = new Promise<void>((resolve) => { resume = resolve; });
  let paused = false;
  const done = follower.catchUp('1-0', async (after) => stream.filter((e) => compareStreamIds(e.id, after) > 0), () => {
    if (sent.length === 2 && !paused) {
      paused = true;
      return resumed;
    }
    return undefined;
  });
  await new Promise((resolve) => setImmediate(resolve));
  // Live entries meanwhile are queued behind the catch-up.
  follower.offer({ id: '6-0' });
  assert.deepEqual(sent, ['2-0', '3-0'], 'nothing more is sent while paused');
  resume();
  await done;
  assert.deepEqual(sent, ['2-0', '3-0', '4-0', '5-0', '6-0']);
});

test('a catch-up paused again as its pause ends (the drain paused the connection anew) waits again before it sends on', async () => {
  const { follower, sent } = recording();
  follower.hold();
  const stream = ids('2-0', '3-0', '4-0');
  let resumeFirst: () => void = () => undefined;
  let resumeSecond: () => void = () => undefined;
  const first = new Promise<void>((resolve) => { resumeFirst = resolve; });
  const second = new Promise<void>((resolve) => { resumeSecond = resolve; });
  let asked = 0;
  const done = follower.catchUp('1-0', async (after) => stream.filter((e) => compareStreamIds(e.id, after) > 0), () => {
    if (sent.length !== 1) return undefined;
    asked += 1;
    // After the first entry: paused; asked again once that pause ends, paused anew.
    return asked === 1 ? first : asked === 2 ? second : undefined;
  });
  await new Promise((resolve) => setImmediate(resolve));
  resumeFirst();
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(sent, ['2-0'], 'nothing more is sent while paused anew');
  resumeSecond();
  await done;
  assert.deepEqual(sent, ['2-0', '3-0', '4-0']);
});

test('a catch-up read that fails switches to live and rethrows; what it could not read is a gap before the next entry', async () => {
  const { follower, sent } = recording();
  follower.hold();
  follower.offer({ id: '9-0' });
  await assert.rejects(follower.catchUp('1-0', async () => {
    throw new Error('redis down');
  }), /redis down/);
  assert.deepEqual(sent, ['gap 1-0..9-0', '9-0']);
  follower.offer({ id: '10-0' });
  assert.deepEqual(sent, ['gap 1-0..9-0', '9-0', '10-0']);
});

test('entries the node\'s reader lost: a gap in their place, from what the connection was sent last, unless a catch-up sent past them', async () => {
  // Live: the gap goes out between the entries, from the reader's last entry.
  const live = recording();
  live.follower.release();
  live.follower.offer({ id: '1-0' });
  live.follower.offerLost({ after: '1-0', before: '9-0', lastLost: '8-0' });
  live.follower.offer({ id: '9-0' });
  assert.deepEqual(live.sent, ['1-0', 'gap 1-0..9-0', '9-0']);

  // Queued during a catch-up that read past the last one lost (from the stream, while
  // they were still there): no gap.
  const past = recording();
  past.follower.hold();
  await past.follower.catchUp('0-0', async (after) => {
    if (after === '0-0') {
      past.follower.offerLost({ after: '1-0', before: '9-0', lastLost: '8-0' });
      return ids('2-0', '8-0', '9-0');
    }
    return [];
  });
  past.follower.offer({ id: '10-0' });
  assert.deepEqual(past.sent, ['2-0', '8-0', '9-0', '10-0']);

  // A catch-up that stopped short of them: a gap from its last entry.
  const short = recording();
  short.follower.hold();
  await short.follower.catchUp('0-0', async (after) => {
    if (after === '0-0') {
      short.follower.offerLost({ after: '1-0', before: '9-0', lastLost: '8-0' });
      return ids('2-0', '3-0');
    }
    return [];
  });
  short.follower.offer({ id: '9-0' });
  assert.deepEqual(short.sent, ['2-0', '3-0', 'gap 3-0..9-0', '9-0']);
});

test('live entries queued during a catch-up go out in ID order even when the history was trimmed past them before the catch-up read them', async () => {
  const { follower, sent } = recording();
  follower.hold();
  // The history held h1..h3 (1-0..3-0); live p1..p5 (11-0..15-0) arrive while the
  // catch-up sends h1; the history (cap 3) keeps only p3..p5 when the next page is read.
  await follower.catchUp('0-0', async (after) => {
    if (after === '0-0') {
      for (const e of ids('11-0', '12-0', '13-0', '14-0', '15-0')) follower.offer(e);
      return ids('1-0', '2-0', '3-0');
    }
    return ids('13-0', '14-0', '15-0').filter((e) => compareStreamIds(e.id, after) > 0);
  });
  follower.offer({ id: '16-0' });
  assert.deepEqual(sent, ['1-0', '2-0', '3-0', '11-0', '12-0', '13-0', '14-0', '15-0', '16-0']);
});

test('a history trimmed past the cursor is a gap only for what the live feed does not bring, up to the next entry sent', async () => {
  // Trimmed through 12-0 when the page after 3-0 is read: 11-0 and 12-0 came live
  // (queued); what lay between 3-0 and the live feed's start is gone.
  const run = async (liveFrom: string | undefined): Promise<string[]> => {
    const { follower, sent } = recording();
    follower.hold();
    await follower.catchUp('0-0', async (after) => {
      if (after === '0-0') {
        for (const e of ids('11-0', '12-0', '13-0')) follower.offer(e);
        return ids('1-0', '2-0', '3-0');
      }
      if (after === '3-0') return { entries: ids('13-0'), lastTrimmed: '12-0' };
      return { entries: [], lastTrimmed: '12-0' };
    }, undefined, liveFrom);
    return sent;
  };
  // The live feed began at 10-0: something between 3-0 and it (at least 10-0) is lost.
  assert.deepEqual(await run('10-0'), ['1-0', '2-0', '3-0', 'gap 3-0..11-0', '11-0', '12-0', '13-0']);
  // It began at 3-0: everything after the cursor came live; no gap.
  assert.deepEqual(await run('3-0'), ['1-0', '2-0', '3-0', '11-0', '12-0', '13-0']);
  // Not known: any trim past the cursor is told.
  assert.deepEqual(await run(undefined), ['1-0', '2-0', '3-0', 'gap 3-0..11-0', '11-0', '12-0', '13-0']);
});

test('a cursor at or past where the live feed began reads no history: a lagging reader brings the rest, its losses told in their place', async () => {
  const { follower, sent } = recording();
  follower.hold();
  const reads: string[] = [];
  // The node's reader is at 5-0 (behind); the client comes back after 20-0.
  await follower.catchUp('20-0', async (after) => {
    reads.push(after);
    return { entries: ids('40-0', '41-0'), lastTrimmed: '39-0' };
  }, undefined, '5-0');
  assert.deepEqual(reads, [], 'the history is not read');
  // The reader goes on: old entries, then the loss of 11-0..39-0, then 40-0.
  for (const e of ids('6-0', '10-0')) follower.offer(e);
  follower.offerLost({ after: '10-0', before: '40-0', lastLost: '39-0' });
  for (const e of ids('40-0', '41-0')) follower.offer(e);
  assert.deepEqual(sent, ['gap 20-0..40-0', '40-0', '41-0']);
});

test('tag filters: all, any, both, none', () => {
  const tags = new Set(['vip', 'fr']);
  assert.equal(matchesFilter(undefined, tags), true);
  assert.equal(matchesFilter({ all: ['vip', 'fr'] }, tags), true);
  assert.equal(matchesFilter({ all: ['vip', 'beta'] }, tags), false);
  assert.equal(matchesFilter({ any: ['beta', 'fr'] }, tags), true);
  assert.equal(matchesFilter({ any: ['beta', 'en'] }, tags), false);
  assert.equal(matchesFilter({ all: ['vip'], any: ['en', 'fr'] }, tags), true);
  assert.equal(matchesFilter({ all: ['vip'], any: ['en'] }, tags), false);
  assert.equal(matchesFilter({ all: ['vip'] }, new Set()), false);
});

test('a full catch-up queue\'s dropped entries are told once: not again when a gap for the trimmed history covered them', async () => {
  const run = async (liveFrom: string | undefined): Promise<{ sent: string[]; gaps: string[] }> => {
    const sent: string[] = [];
    const gaps: string[] = [];
    const f = new StreamFollower<{ id: string }>({ sendEntry: (e) => sent.push(e.id), sendGap: (from, to) => gaps.push(`${from}..${to}`) });
    let reads = 0;
    await f.catchUp('1-0', async () => {
      reads += 1;
      if (reads > 1) return { entries: [], lastTrimmed: '150-0' };
      // While the first page is read, more live entries than the queue holds arrive.
      for (let i = 0; i <= MAX_CATCH_UP_QUEUE; i++) f.offer({ id: `100-${i}` });
      // The history was trimmed past all of them meanwhile.
      return { entries: [{ id: '200-0' }], lastTrimmed: '150-0' };
    }, undefined, liveFrom);
    return { sent, gaps };
  };
  // Where the live feed began not known: it may still bring entries up to 150-0 (the
  // newest trimmed) after the page, which would be dropped as older than 200-0, so
  // they are told before it, and the 10,000 queued are kept.
  const unknown = await run(undefined);
  assert.equal(unknown.sent.length, MAX_CATCH_UP_QUEUE + 1, 'the 10,000 queued live entries kept, then the page\'s');
  assert.deepEqual(unknown.gaps, ['1-0..100-1', `100-${MAX_CATCH_UP_QUEUE}..200-0`]);
  // The live feed began at 99-0: everything retained after the cursor is newer than the
  // trimmed 150-0 and comes live; the page is not sent, only the queue.
  const known = await run('99-0');
  assert.equal(known.sent.length, MAX_CATCH_UP_QUEUE);
  assert.deepEqual(known.gaps, ['1-0..100-1']);
});

test('live entries a full queue dropped while held for welcome (no catch-up) are told as a gap from where the connection began', () => {
  const gaps: string[] = [];
  const f = new StreamFollower<{ id: string }>({ sendEntry: () => undefined, sendGap: (from, to) => gaps.push(`${from}..${to}`) });
  f.hold();
  f.startAfter('99-0');
  for (let i = 0; i <= MAX_CATCH_UP_QUEUE; i++) f.offer({ id: `100-${i}` });
  f.release();
  // 100-0 was dropped; nothing before it was this connection's to get.
  assert.deepEqual(gaps, ['99-0..100-1']);
});

test('a history trimmed exactly up to the cursor lost nothing after it: no gap', async () => {
  const { follower, sent } = recording();
  follower.hold();
  await follower.catchUp('5-0', async (after) => (after === '5-0'
    ? { entries: ids('6-0', '7-0'), lastTrimmed: '5-0' }
    : { entries: [], lastTrimmed: '5-0' }));
  assert.deepEqual(sent, ['6-0', '7-0']);
});

test('a history trimmed past the cursor, with nothing left to read before the live feed and nothing queued, is a gap up to the first entry retained', async () => {
  const { follower, sent } = recording();
  follower.hold();
  // The page is read up to where the live feed began (10-0): the first entry retained
  // (12-0) lies past it and will come live; 2-0..5-0 were trimmed.
  await follower.catchUp('1-0', async () => ({ entries: [], lastTrimmed: '5-0' }), undefined, '10-0');
  follower.offer({ id: '12-0' });
  assert.deepEqual(sent, ['gap 1-0..12-0', '12-0']);
});

test('a loss the node\'s reader told during a catch-up goes out before the page entry that follows it, also when the page says nothing of trimming', async () => {
  const { follower, sent } = recording();
  follower.hold();
  await follower.catchUp('0-0', async (after) => {
    if (after === '0-0') {
      follower.offerLost({ after: '1-0', before: '9-0', lastLost: '8-0' });
      return ids('2-0', '3-0');
    }
    // 4-0..8-0 are gone from the history too: the next page starts at 9-0.
    if (after === '3-0') return ids('9-0');
    return [];
  });
  assert.deepEqual(sent, ['2-0', '3-0', 'gap 3-0..9-0', '9-0']);
});

test('a loss dropped from a full catch-up queue is told as a gap, and the entry it led to is still sent', async () => {
  const { follower, sent } = recording();
  follower.hold();
  await follower.catchUp('0-0', async () => {
    // A loss, then as many live entries as the queue holds, the first of them the
    // entry the loss led to: the loss is the one dropped.
    follower.offerLost({ after: '0-0', before: '9-0', lastLost: '8-0' });
    for (let i = 0; i < MAX_CATCH_UP_QUEUE; i++) follower.offer({ id: `9-${i}` });
    return [];
  });
  assert.equal(sent[0], 'gap 0-0..9-0');
  assert.equal(sent[1], '9-0', 'the entry after the dropped loss is sent');
  assert.equal(sent.length, MAX_CATCH_UP_QUEUE + 1);
});

test('a catch-up queue holds 10,000 live entries (docs/protocol.md): the 10,001st drops the oldest, told as a gap', () => {
  const run = (n: number): string[] => {
    const { follower, sent } = recording();
    follower.hold();
    follower.startAfter('0-0');
    for (let i = 0; i < n; i++) follower.offer({ id: `1-${i}` });
    follower.release();
    return sent.filter((s) => s.startsWith('gap'));
  };
  assert.deepEqual(run(10_000), []);
  assert.deepEqual(run(10_001), ['gap 0-0..1-1']);
});

test('a connection that closes during a catch-up gets nothing more: not the rest of the page, not the queued live entries', async () => {
  const { follower, sent } = recording();
  follower.hold();
  let resume!: () => void;
  let paused = false;
  const catchUp = follower.catchUp('0-0', async (after) => {
    if (after !== '0-0') return [];
    follower.offer({ id: '10-0' });
    return ids('1-0', '2-0', '3-0');
  }, () => {
    // Paused by backpressure after the first entry; the connection closes meanwhile.
    if (paused) return undefined;
    paused = true;
    return new Promise<void>((resolve) => { resume = resolve; });
  });
  await new Promise((resolve) => setImmediate(resolve));
  follower.stop();
  resume();
  await catchUp;
  assert.deepEqual(sent, ['1-0']);
});

test('a connection that closes while a catch-up read is out gets none of the live entries queued meanwhile', async () => {
  const { follower, sent } = recording();
  follower.hold();
  await follower.catchUp('0-0', async () => {
    for (const e of ids('10-0', '11-0')) follower.offer(e);
    follower.stop();
    return [];
  });
  assert.deepEqual(sent, []);
});

test('a loss after entries this connection was not offered (its tag filter skipped them) is a gap from where the reader\'s loss began, not from the connection\'s last entry', () => {
  const { follower, sent } = recording();
  follower.release();
  follower.offer({ id: '1-0' });
  // The reader handed out 2-0..5-0 to other connections, then lost 6-0..8-0.
  follower.offerLost({ after: '5-0', before: '9-0', lastLost: '8-0' });
  follower.offer({ id: '9-0' });
  assert.deepEqual(sent, ['1-0', 'gap 5-0..9-0', '9-0']);
});
