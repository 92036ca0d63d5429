/**
 * The machine's read-ahead (src/delivery/read-ahead.ts, docs/decisions.md "Read-ahead"):
 * what a page held beyond a connection's window is sent from memory as acks free
 * slots, and is dropped when it may no longer be the inbox's truth.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ReadAhead } from '../../src/delivery/read-ahead.js';
import type { InboxEntry, InboxPage } from '../../src/inbox/inbox.js';
import { MsgKind } from '../../src/ids/msg-id.js';
import { CONFIG, Driver } from './machine-driver.js';

const seqsOf = (d: Driver, conn: string): string[] => d.brief(conn).filter((f) => f.startsWith('msg') || f.startsWith('gap'));

test('a catch-up acking one message at a time reads each page once', () => {
  const d = new Driver({ ...CONFIG, window: 4, pageMax: 4 });
  d.inbox.append(40);
  d.login('a');
  d.settle();
  const got = seqsOf(d, 'a');
  for (let seq = 1; seq <= 40; seq++) {
    d.ack('a', seq);
    d.settle();
    got.push(...seqsOf(d, 'a'));
  }
  assert.deepEqual(got, Array.from({ length: 40 }, (_, i) => `msg ${i + 1}`));
  // 10 pages of 4, and the last fetch that finds nothing more. Reading a page for each
  // freed slot took 37.
  assert.ok(d.fetches.length <= 11, `${d.fetches.length} fetches for 40 messages in pages of 4`);
});

test('what was read ahead is sent even if its content expired since, until a heartbeat drops it', () => {
  const d = new Driver({ ...CONFIG, window: 2, pageMax: 2 });
  d.inbox.append(6);
  d.login('a');
  d.settle();
  d.ack('a', 1); // reads 3, 4; sends 3; 4 is held
  d.settle();
  assert.deepEqual(seqsOf(d, 'a'), ['msg 1', 'msg 2', 'msg 3']);
  d.inbox.expire(4);
  d.ack('a', 2);
  assert.equal(d.pending, undefined, 'seq 4 was read with 3');
  assert.deepEqual(seqsOf(d, 'a'), ['msg 4']);
  d.settle();
  // Now 5 and 6 are read; 5 is sent and 6 held. Its content expires, and a heartbeat
  // comes before the slot frees: 6 is read again, and is a gap.
  d.ack('a', 3);
  d.settle();
  assert.deepEqual(seqsOf(d, 'a'), ['msg 5']);
  d.inbox.expire(6);
  d.heartbeat();
  d.settle();
  d.ack('a', 4);
  d.settle();
  assert.deepEqual(seqsOf(d, 'a'), ['gap 6-6 expired']);
});

test('a notify of a seq that is not new drops the read-ahead: a restored inbox\'s new messages are not replaced by old ones', () => {
  const d = new Driver({ ...CONFIG, window: 2, pageMax: 2 });
  d.inbox.append(6);
  d.login('a');
  d.settle();
  d.ack('a', 1); // reads 3, 4; sends 3; holds 4
  d.settle();
  d.frames('a');
  d.inbox.restoreTo(3); // Redis restored: seqs after 3 are gone ...
  // ... and seqs 4..7 are new messages: past the newest seq read (6), so no read shows
  // the loss (epoch-guard.ts), and only the dropped read-ahead keeps the old 4 from going.
  d.inbox.append(4);
  d.notify(4);
  d.settle();
  d.ack('a', 3);
  d.settle();
  const frames = d.frames('a');
  const four = frames.find((f) => f.t === 'msg' && f.seq === 4);
  assert.ok(four && four.t === 'msg', `seq 4 sent: ${JSON.stringify(frames)}`);
  assert.equal(four.id, d.inbox.idOf(4), 'the new message at seq 4, not the one read before the restore');
});

test('ReadAhead: a continuing page is appended up to its bound; another epoch, a shorter inbox or a jump replaces it', () => {
  const entry = (seq: number): InboxEntry => ({ seq, id: seq.toString(16).padStart(16, '0'), kind: MsgKind.user });
  const page = (epoch: string, latest: number, ...seqs: number[]): InboxPage => ({ epoch, firstSeq: 1, latestSeq: latest, entries: seqs.map(entry) });
  const held = (r: ReadAhead): number[] => r.view()?.page.entries.map((e) => e.seq) ?? [];
  const r = new ReadAhead(4);
  r.absorb(0, page('ep1', 9, 1, 2), [null, null]);
  r.absorb(2, page('ep1', 9, 3, 4), [null, null]);
  assert.deepEqual(held(r), [1, 2, 3, 4]);
  assert.ok(r.covers(0) && r.covers(3) && !r.covers(4));
  r.absorb(4, page('ep1', 4), []);
  assert.deepEqual(held(r), [1, 2, 3, 4], 'an empty page of an inbox that ends where the read-ahead does changes nothing');
  r.absorb(4, page('ep1', 9, 5), [null]);
  assert.deepEqual(held(r), [5], 'over the bound: replaced');
  r.absorb(5, page('ep2', 9, 6), [null]);
  assert.deepEqual(held(r), [6]);
  assert.equal(r.view()?.page.epoch, 'ep2', 'another epoch: replaced, not appended');
  r.absorb(6, page('ep2', 3), []);
  assert.deepEqual(held(r), [], 'the inbox now ends below what was held: dropped');
  r.absorb(0, page('ep2', 9, 1, 2, 3), [null, null, null]);
  r.absorb(7, page('ep2', 9, 8), [null]);
  assert.deepEqual(held(r), [8], 'not continuing: replaced');
  r.absorb(0, page('ep2', 9, 1, 2, 3), [null, null, null]);
  r.dropThrough(2);
  assert.deepEqual(held(r), [3]);
  assert.ok(!r.covers(1) && r.covers(2));
  r.dropThrough(3);
  assert.equal(r.size, 0);
  // The class's own promises, though the machine gives it neither (its bound is two
  // fetches' worth, and it absorbs only pages with entries): a page longer than the
  // bound is cut to it; an empty page that does not continue what is held changes nothing.
  r.absorb(0, page('ep2', 9, 1, 2, 3, 4, 5, 6), Array.from({ length: 6 }, () => null));
  assert.deepEqual(held(r), [1, 2, 3, 4], 'never more than maxEntries');
  r.absorb(0, page('ep2', 9), []);
  assert.deepEqual(held(r), [1, 2, 3, 4], 'an empty page not continuing: nothing changes');
});

test('the read-ahead is dropped once every connection has been sent it, and when the last connection leaves', () => {
  const d = new Driver({ ...CONFIG, window: 2, pageMax: 2 });
  d.inbox.append(4);
  d.login('a');
  d.settle();
  d.ack('a', 1); // holds 4
  d.settle();
  d.ack('a', 2); // sends 4 from it
  assert.equal(d.pending, undefined);
  d.take(d.m.logout('a'));
  d.inbox.append(2);
  d.login('b');
  d.settle();
  assert.deepEqual(seqsOf(d, 'b'), ['msg 1', 'msg 2']);
});
