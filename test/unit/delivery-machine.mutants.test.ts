/**
 * Edges of the per-user delivery machine (src/delivery/machine.ts, DESIGN.md §5, §6)
 * that a mutation pass over src/delivery found untested: each test names the mutant it
 * kills. Driven by hand with the shared driver (machine-driver.ts), which checks the
 * invariants on every batch.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { MachineConfig } from '../../src/delivery/machine.js';
import { isUnreadable } from '../../src/store/unreadable.js';
import { CONFIG, Driver } from './machine-driver.js';

const msgs = (n: number, from = 1): string[] => Array.from({ length: n }, (_, i) => `msg ${from + i}`);

/** A driver whose connection `a` got and acked all `n` messages of the inbox (n ≤ window); its frames so far are forgotten. */
function caughtUp(n: number, config: MachineConfig): Driver {
  const d = new Driver(config);
  d.inbox.append(n);
  d.login('a');
  d.settle();
  d.ack('a', n);
  d.settle();
  d.frames('a');
  return d;
}

test('offer: a local append of a seq below one already notified from another node does not set the latest back', () => {
  // Mutant killed: offer delivering directly when `entry.seq <= latest` (`!==` → `>`):
  // the one-entry page of the offer set the latest known back to its seq, and the
  // notified message waited for the next heartbeat.
  const d = new Driver({ ...CONFIG, window: 10 });
  d.inbox.append(2);
  d.login('a');
  d.settle();
  d.ack('a', 2);
  d.settle();
  d.frames('a');
  d.take(d.m.pause('a'));
  d.inbox.append(2); // seq 3 appended on this node, seq 4 on another
  d.notify(4); // the other node's notify comes first
  const { page, records } = d.inbox.read(2, 1);
  const [entry] = page.entries;
  const [record] = records;
  assert.ok(entry && entry.malformed !== true && record && !isUnreadable(record) && entry.seq === 3);
  d.take(d.m.offer(entry, 'ep1', record));
  assert.deepEqual(d.brief('a'), [], 'paused: nothing sent');
  d.take(d.m.drain('a'));
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 3', 'msg 4'], 'seq 4, notified, is not left for a heartbeat');
});

test('after a failed fetch, the retry reads for the connection known to be behind, not for one only the heartbeat asks for', () => {
  // Mutant killed: the pump's preference for a connection behind dropped (the oldest
  // served first, whatever it wants): the retry read after the caught-up connection's
  // cursor, brought nothing, and the one behind needed a second read.
  const d = new Driver({ ...CONFIG, window: 10 });
  d.inbox.append(2);
  d.login('a');
  d.login('b');
  d.settle();
  d.ack('a', 2);
  d.ack('b', 2);
  d.settle();
  d.take(d.m.pause('b'));
  d.inbox.append();
  d.notify(3);
  d.settle(); // a gets msg 3; b, paused, does not
  d.heartbeat();
  d.settle(); // drops what was read ahead for b
  d.take(d.m.drain('b')); // b pulls from 2…
  assert.deepEqual(d.pending?.effect, { kind: 'fetch', afterSeq: 2, limit: 10 });
  d.fail(); // …and the read fails
  const fetches = d.fetches.length;
  d.heartbeat(); // the driver's retry: a wants a pull too, and was served longer ago
  assert.deepEqual(d.pending?.effect, { kind: 'fetch', afterSeq: 2, limit: 10 }, 'the retry reads for b');
  d.settle();
  assert.equal(d.fetches.length, fetches + 1, 'one read serves both');
  assert.deepEqual(d.brief('b').slice(-1), ['msg 3']);
});

test('a page that ends before a trailing hole tells the hole with its last entry, in the same read', () => {
  // Mutant killed: the trailing gap of a complete page told only to a connection past
  // its last entry (`c.sent >= last` → `>`): a connection that took the page's last
  // entry needed one more read of the inbox to learn of the hole.
  const d = new Driver({ ...CONFIG, window: 10 });
  d.inbox.append(5);
  d.inbox.holes.add(4).add(5); // deleted by hand (XDEL): the counter stays at 5
  d.login('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'msg 2', 'msg 3', 'gap 4-5 trimmed']);
  assert.equal(d.fetches.length, 1, 'one read');
});

test('redelivery: a round whose resend has not gone out waits that round\'s back-off again, not the ack timeout', () => {
  // Mutant killed: the wait kept for a resend not yet sent being the ack timeout
  // (10 s) in place of the round's back-off (2 s): a failed read delayed the resend
  // five times longer than the schedule (DESIGN.md §5: 2 s, 4 s, 6 s).
  const d = new Driver();
  d.inbox.append(3);
  d.login('a');
  d.settle();
  d.due('a');
  assert.equal(d.timers.get('a'), CONFIG.backoffMs[0]);
  d.fail(); // the resend's read failed
  d.due('a');
  assert.equal(d.timers.get('a'), CONFIG.backoffMs[0], 'the first round\'s back-off again');
  d.heartbeat();
  d.settle();
  assert.deepEqual(d.brief('a').slice(-3), ['msg 1 r', 'msg 2 r', 'msg 3 r']);
  d.due('a');
  assert.equal(d.timers.get('a'), CONFIG.backoffMs[1], 'then the second round, as scheduled');
});

test('redelivery: a round whose resend was only gaps (content expired) ends when its wait passes; the next message gets the whole schedule', () => {
  // Mutant killed: `sent >= redeliverUpTo` → `>` in redeliveryRound: a round that had
  // resent everything, all as gaps, was taken for one whose resend had not gone out: its
  // count stayed, and the next message was redelivered after the back-off, not the ack
  // timeout, and closed 4008 a round early.
  const d = new Driver();
  d.inbox.append(1);
  d.login('a');
  d.settle();
  d.inbox.expire(1);
  d.due('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'gap 1-1 expired r']);
  d.due('a'); // the round's back-off passed: nothing awaits an ack
  assert.equal(d.timers.get('a'), null, 'the round is over: no timer');
  d.inbox.append();
  d.notify(2);
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 2']);
  assert.equal(d.timers.get('a'), CONFIG.ackTimeoutMs, 'a new round: the ack timeout');
  for (const wait of CONFIG.backoffMs) {
    d.due('a');
    d.settle();
    assert.equal(d.timers.get('a'), wait);
    assert.deepEqual(d.closes, []);
  }
  d.due('a');
  assert.deepEqual(d.closes, [{ conn: 'a', code: 4008 }]);
});

test('what a page read beyond a slow connection\'s window is kept for it across two pages: it is served with no read of its own', () => {
  // Mutant killed: the read-ahead holding one page (`2 * fetchLimit` → `fetchLimit`):
  // the next page read for the faster connection replaced what the slow one had not
  // taken, and each of its acks cost a read of the inbox again (read-ahead.ts).
  const d = new Driver({ ...CONFIG, window: 3 });
  d.inbox.append(9);
  d.login('a');
  d.login('b');
  d.settle();
  d.ack('a', 3);
  d.settle();
  d.ack('a', 6);
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', ...[1, 2, 3, 4, 5, 6, 7, 8, 9].map((s) => `msg ${s}`)]);
  const fetches = d.fetches.length;
  d.ack('b', 3);
  d.settle();
  d.ack('b', 6);
  d.settle();
  assert.deepEqual(d.brief('b'), ['welcome 1', ...[1, 2, 3, 4, 5, 6, 7, 8, 9].map((s) => `msg ${s}`)]);
  assert.equal(d.fetches.length, fetches, 'b is served from what was read for a');
});

test('with no page cap set, a fetch reads at most 100 entries (DEFAULT_PAGE_MAX), however large the window', () => {
  // Mutant killed: DEFAULT_PAGE_MAX = 1000: with the default settings a window of 5,000
  // read and wrote pages of 1,000 messages in one run, ten times the overshoot past the
  // socket's high-water mark that the cap is there to bound (effects.ts).
  const d = new Driver({ ...CONFIG, window: 5000 });
  d.inbox.append(1000);
  const effects = d.take(d.m.login('a', 'phone', { kind: 'first' }));
  assert.deepEqual(effects.find((e) => e.kind === 'fetch'), { kind: 'fetch', afterSeq: 0, limit: 100 });
});

test('an inbox lost with nothing appended since (no epoch at all) resets a connected device with epoch null and seq 0, asking for no new epoch', () => {
  // No mutant: this pins a documented frame no test sent (docs/protocol.md, `reset`:
  // `epoch` null and `seq` 0 when Redis lost the inbox and nothing was appended since).
  // A connection that was sent anything has seen an epoch, so this goes by the
  // epoch-change path; the `page.epoch === null` branch of EpochGuard.judge below it was
  // found unreachable (its mutant survives as equivalent).
  const d = new Driver({ ...CONFIG, window: 10 });
  d.inbox.append(3);
  d.login('a');
  d.settle();
  d.ack('a', 3);
  d.frames('a');
  d.inbox.recreate(null); // FLUSHALL, no append since
  d.heartbeat();
  d.settle();
  assert.deepEqual(d.brief('a'), ['reset null 0']);
  assert.deepEqual(d.rotations, []);
  d.inbox.append(); // the next append creates the inbox, in a new epoch: as after a welcome with epoch null
  d.notify(1);
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 1']);
});

test('a trim is told to a connection whose window is full at the next pull: a gap takes no room in the window', () => {
  // Mutant killed: deliverPage without the gap of what was trimmed below the page's
  // first entry: a full window learnt of the trim only once an ack freed a slot.
  const d = new Driver({ ...CONFIG, window: 3 });
  d.inbox.append(3);
  d.login('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'msg 2', 'msg 3']);
  d.inbox.append(9);
  d.inbox.trimTo(10); // the cap trimmed 1..9
  d.heartbeat();
  d.settle();
  assert.deepEqual(d.brief('a'), ['gap 4-9 trimmed']);
  d.ack('a', 3);
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 10', 'msg 11', 'msg 12']);
});

test('redelivery: a message sent while others await their ack does not push their ack timeout back', () => {
  // Mutant killed: deliverPage arming the timer whenever it sends (no `wasIdle`): each
  // new message moved the redelivery of the unacked ones an ack timeout later, so a
  // client that never acks was not resent anything while messages kept coming
  // (DESIGN.md §5: resend when `acked < sent` for the ack timeout).
  const d = new Driver({ ...CONFIG, window: 10 });
  d.inbox.append(1);
  d.login('a');
  d.settle();
  assert.equal(d.timers.get('a'), CONFIG.ackTimeoutMs);
  d.inbox.append();
  d.notify(2);
  const effects = d.answer();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'msg 2']);
  assert.deepEqual(effects.filter((e) => e.kind === 'timer'), [], 'the timer armed for msg 1 stays as it was');
  const offered = d.offer(); // msg 3, delivered with no read
  assert.deepEqual(offered.filter((e) => e.kind === 'timer'), []);
});

test('a rotation asked for while a fetch was in flight that then failed: the first read after the rotation resets the connection', () => {
  // Mutant killed: fetchFailed not telling the epoch guard its fetch ended: the failed
  // fetch's "drop its page" mark stayed, and the first good read after the rotation was
  // dropped in its place, and the `reset` waited for one more read.
  const d = caughtUp(5, { ...CONFIG, window: 10 });
  d.heartbeat(); // a fetch in flight
  d.inbox.restoreTo(4);
  d.offer(); // seq 5 again, another message: a new epoch is asked for
  assert.equal(d.rotating, true);
  d.fail(); // the fetch in flight fails
  d.rotated();
  d.answer();
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 5'], 'the first read after the rotation resets');
  d.settle();
  assert.deepEqual(d.brief('a'), msgs(5));
});
