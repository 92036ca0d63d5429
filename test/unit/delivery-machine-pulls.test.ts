/**
 * The delivery machine's pulls around a full window and a login during a fetch
 * (src/delivery/machine.ts; DESIGN.md §5, §11). A full window reads (one entry, to see
 * a new epoch) on a heartbeat, a rotation, a notify of a seq already sent, or a local
 * append of another epoch, and not on every late notify of a new seq: a slow consumer
 * under a stream of appends fetched once per append while it took nothing. A
 * connection that logs in while a fetch runs is not judged by that fetch's page when
 * the page would reset it (it may predate seqs the device was sent elsewhere): before,
 * such a login made the node rotate the user's epoch and reset every device. A notify
 * of a seq not new is judged when the pull is made, not when it arrives: a fetch in
 * flight may yet deliver that seq from the inbox as it was. A rotation a login's claim
 * asks for that Redis refuses (its cool-down) resets that login alone, once, and is not
 * asked for again and again; but a local append reusing a delivered seq, offered while
 * that rotation was in flight, asks for it again as proven (before, the epoch was kept
 * and devices skipped the seqs assigned again with no reset). A read that shows another
 * node's epoch and carries such a claim resets each connection once, not again after
 * the refusal.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CONFIG, Driver, FIRST } from './machine-driver.js';

test('a full window does not fetch once per late notify of new messages', () => {
  const d = new Driver({ ...CONFIG, window: 3 });
  d.inbox.append(3);
  d.login('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'msg 2', 'msg 3']);
  // One heartbeat's pull (allowed: it is how a new epoch is seen) reads latest 4.
  d.inbox.append();
  d.heartbeat();
  d.settle();
  const before = d.fetches.length;
  // 100 appends from other nodes, each notify arriving just after a fetch saw it.
  for (let k = 4; k < 104; k++) {
    d.inbox.append(); // seq k + 1, in Redis before the next read
    d.notify(k); // late: seq k was already read
    d.settle();
  }
  const during = d.fetches.length - before;
  assert.ok(during <= 1, `${during} fetches for a connection whose window stayed full (nothing sent): one per late notify`);
  assert.deepEqual(d.brief('a'), [], 'nothing sent while the window is full');
});

test('a full window is still reset on the notify of an append to a recreated inbox', () => {
  const d = new Driver({ ...CONFIG, window: 3 });
  d.inbox.append(5);
  d.login('a');
  d.settle();
  d.brief('a');
  d.inbox.recreate('ep2');
  d.inbox.append();
  d.notify(1);
  d.settle();
  assert.deepEqual(d.brief('a').filter((f) => f.startsWith('reset')).length, 1, 'reset on the recreated inbox\'s first notify');
});

test('a full window is reset on a local append to a recreated inbox whose seq passed the old latest', () => {
  const d = new Driver({ ...CONFIG, window: 3 });
  d.inbox.append(3);
  d.login('a');
  d.settle();
  d.brief('a');
  // The inbox is recreated and its first appends (on other nodes, notifies lost) pass
  // the old latest; this node's own append (seq 5, another epoch) is offered.
  d.inbox.recreate('ep2');
  d.inbox.append(4);
  d.offer();
  d.settle();
  assert.deepEqual(d.brief('a').filter((f) => f.startsWith('reset')).length, 1, 'reset on the append of another epoch');
});

/** A driver (window 100) whose connection `a` was sent seqs 1..4 and acked them; `a`'s frames so far are read. */
function caughtUpOnFour(): Driver {
  const d = new Driver({ ...CONFIG, window: 100 });
  d.inbox.append(4);
  d.login('a');
  d.settle();
  d.ack('a', 4);
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'msg 2', 'msg 3', 'msg 4']);
  return d;
}

test('a login during a fetch read before a newer append does not rotate the epoch', () => {
  const d = caughtUpOnFour();
  // A heartbeat's pull reads the inbox at latest 4 …
  d.heartbeat();
  assert.ok(d.pending);
  // … then seq 5 is appended, delivered on another node to device b, which moves here.
  d.inbox.append();
  d.notify(5);
  d.login('b', { kind: 'after', seq: 5, epoch: d.inbox.epoch as string });
  d.answer();
  assert.deepEqual(d.rotations, [], 'no rotate-epoch: Redis lost nothing (seq 5 is there)');
  d.settle();
  assert.deepEqual(d.rotations, []);
  assert.deepEqual(d.brief('b').filter((f) => f.startsWith('reset')), [], `b resumes after 5 with no reset: ${JSON.stringify(d.brief('b'))}`);
  assert.deepEqual(d.brief('a'), ['msg 5'], 'a gets msg 5 once, no reset');
});

test('a full window is reset when a recreated inbox\'s seq is notified while the fetch delivering the old one is in flight', () => {
  const d = new Driver({ window: 1, pageMax: 1, ackTimeoutMs: 10_000, backoffMs: [2_000], heartbeatMs: 25_000 });
  d.login('c1');
  d.answer();
  assert.deepEqual(d.brief('c1'), ['welcome 1']);
  // The inbox is recreated (epoch ep-a) and seq 1 appended: the pull starts, reading ep-a's seq 1.
  d.inbox.recreate('ep-a');
  d.notify(d.inbox.append());
  assert.ok(d.pending);
  // While it is in flight, the inbox is recreated again (ep-b) and its seq 1 appended.
  d.inbox.recreate('ep-b');
  d.notify(d.inbox.append());
  d.settle();
  // c1 got ep-a's seq 1 (its window of 1 is now full): the notify of ep-b's seq 1 must
  // make it read once more and be reset to ep-b, without waiting for its ack.
  const frames = d.brief('c1');
  assert.deepEqual(frames.slice(0, 2), ['reset ep-a 1', 'msg 1']);
  assert.ok(frames.includes('reset ep-b 1'), `c1 stays on ep-a with a full window: ${JSON.stringify(frames)}, fetches ${d.fetches.length}`);
});

test('a resume claim whose rotation the cool-down refuses resets that connection alone, under the kept epoch; a connection already there is not reset, and no second rotate-epoch loops', () => {
  const d = caughtUpOnFour();
  d.inbox.coolingDown = true;
  d.login('b', { kind: 'after', seq: 9, epoch: 'ep1' });
  d.settle();
  assert.deepEqual(d.rotations, ['ep1'], 'asked once, refused');
  assert.equal(d.inbox.epoch, 'ep1');
  assert.deepEqual(d.brief('b'), ['welcome 1', 'reset ep1 4', 'msg 1', 'msg 2', 'msg 3', 'msg 4']);
  assert.deepEqual(d.brief('a'), [], 'the other connection is not reset');
  // The next claim asks Redis again (the cool-down may have passed): refused once more.
  d.m.logout('b');
  d.login('b2', { kind: 'after', seq: 9, epoch: 'ep1' }, 'dev-b');
  d.settle();
  assert.deepEqual(d.rotations, ['ep1', 'ep1']);
  assert.deepEqual(d.brief('b2'), ['welcome 1', 'reset ep1 4', 'msg 1', 'msg 2', 'msg 3', 'msg 4']);
  assert.deepEqual(d.brief('a'), []);
  // A loss the deliveries prove is rotated whatever the cool-down: both are reset.
  d.inbox.restoreTo(2);
  d.heartbeat();
  d.settle();
  assert.deepEqual(d.rotationCauses, ['resume', 'resume', 'delivered']);
  assert.equal(d.inbox.epoch, 'ep1-rotated');
  assert.deepEqual(d.brief('a').slice(0, 1), ['reset ep1-rotated 2']);
  assert.deepEqual(d.brief('b2').slice(0, 1), ['reset ep1-rotated 2']);
});

test('a local append reusing a delivered seq, offered while a resume claim\'s rotation is in flight that the cool-down refuses, still rotates the epoch (an offline device)', () => {
  const d = new Driver({ ...CONFIG, window: 100 });
  d.inbox.append(2);
  d.login('a', FIRST, 'phone');
  d.login('slow', FIRST, 'watch');
  d.settle();
  d.take(d.m.pause('slow')); // the watch stays at sent 2: the next pulls start after 2
  d.notify(d.inbox.append(2));
  d.settle();
  d.m.logout('a'); // the phone goes offline holding last_seq 4 of ep1
  d.inbox.restoreTo(2); // Redis comes back older: 3 and 4 lost
  d.inbox.coolingDown = true; // a claim's rotation was made < 60 s ago
  // 3..5 land before any read (3 and 5 on another node, 4 here): the read's latest (5)
  // is not below the highest seq known (4) and its newest entry is past it, so only the
  // offer of 4 shows the loss, which is what this tests.
  d.inbox.append(3);
  d.login('b', { kind: 'after', seq: 9, epoch: 'ep1' }, 'tablet');
  d.answer(); // the claim's page asks for a rotation (resume): in flight
  assert.ok(d.rotating);
  d.offerAppended(4); // seq 4, appended here: the seq 4 the phone was sent names another message now
  d.settle();
  assert.deepEqual(d.rotationCauses, ['resume', 'delivered'], 'the refused rotation is asked for again as delivered');
  assert.equal(d.inbox.epoch, 'ep1-rotated', 'ep1 kept: the phone resuming after 4 would skip the new 3 and 4');
});

test('a local append reusing a delivered seq, offered while a resume claim\'s rotation is in flight that the cool-down refuses, resets a connected device', () => {
  const d = caughtUpOnFour();
  d.inbox.restoreTo(2);
  d.inbox.coolingDown = true;
  // 3 and 5 (another node) and 4 (this node) land before any read: the read's newest
  // entry (5) is past the highest seq the node knows (4), so only the offer shows the loss.
  d.inbox.append(3);
  d.login('b', { kind: 'after', seq: 9, epoch: 'ep1' }, 'tablet');
  d.answer(); // latest 5: a (sent 4) shows no loss; b's claim asks for a rotation
  assert.ok(d.rotating);
  d.offerAppended(4); // this node's append of 4, offered now
  d.settle();
  assert.deepEqual(d.rotationCauses, ['resume', 'delivered']);
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 5', 'msg 1', 'msg 2', 'msg 3', 'msg 4', 'msg 5'], 'a skips the new 3 and 4 with no reset');
});

test('a rotation a local append reusing a delivered seq asked for, whose call fails, is asked for again at the next heartbeat (the session\'s retry after its back-off) and resets a connected device', () => {
  const d = caughtUpOnFour();
  d.inbox.restoreTo(2);
  d.inbox.append(2); // 3 (another node) and 4 (this node) land before any read
  d.offerAppended(4); // seq 4 names another message: only this offer shows the loss
  assert.deepEqual(d.rotationCauses, ['delivered']);
  assert.deepEqual(d.rotationFailed(), [], 'failed (Redis down): no pull, which would read latest 4 and see nothing');
  assert.equal(d.pending, undefined);
  d.settle();
  assert.deepEqual(d.rotationCauses, ['delivered'], 'nothing asks before the retry');
  d.heartbeat(); // the session's retry timer
  assert.deepEqual(d.rotationCauses, ['delivered', 'delivered'], 'the sign was kept and the rotation asked for again');
  d.settle();
  assert.equal(d.inbox.epoch, 'ep1-rotated', 'ep1 kept: an offline device resuming after 4 would skip the new 3 and 4');
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 4', 'msg 1', 'msg 2', 'msg 3', 'msg 4'], 'a skips the new 3 and 4 with no reset');
});

test('a sign of the node\'s own deliveries kept during a resume claim\'s rotation whose call fails is asked for again at the next heartbeat, cool-down or not', () => {
  const d = caughtUpOnFour();
  d.inbox.restoreTo(2);
  d.inbox.coolingDown = true;
  d.inbox.append(3); // 3..5, the read's newest (5) past the highest seq known (4)
  d.login('b', { kind: 'after', seq: 9, epoch: 'ep1' }, 'tablet');
  d.answer(); // b's claim asks for a rotation (resume): in flight
  d.offerAppended(4); // the proven sign, kept for the answer
  d.rotationFailed();
  assert.equal(d.pending, undefined, 'no pull while the proven rotation is owed');
  d.heartbeat();
  d.settle();
  assert.deepEqual(d.rotationCauses, ['resume', 'delivered']);
  assert.equal(d.inbox.epoch, 'ep1-rotated');
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 5', 'msg 1', 'msg 2', 'msg 3', 'msg 4', 'msg 5']);
});

test('a resume claim\'s rotation whose call fails, with no sign of the node\'s own deliveries, is dropped: the pull that follows reads, and the claim still joining asks again', () => {
  const d = caughtUpOnFour();
  d.inbox.restoreTo(2);
  d.login('b', { kind: 'after', seq: 9, epoch: 'ep1' }, 'tablet');
  d.answer(); // a (sent 4) sees latest 2: delivered wins over b's claim
  assert.deepEqual(d.rotationCauses, ['delivered']);
  d.settle();
  d.brief('a');
  d.brief('b');
  // A later claim on the rotated inbox, above its latest: resume.
  d.m.logout('b');
  d.login('c', { kind: 'after', seq: 9, epoch: 'ep1-rotated' }, 'watch');
  d.answer();
  assert.deepEqual(d.rotationCauses, ['delivered', 'resume']);
  assert.ok(d.pending === undefined);
  d.rotationFailed();
  assert.ok(d.pending, 'pulls at once, as before');
  d.answer();
  assert.deepEqual(d.rotationCauses, ['delivered', 'resume', 'resume'], 'the claim still joining asks again');
  d.settle();
  assert.equal(d.inbox.epoch, 'ep1-rotated-rotated');
});

test('a connection is reset once when the read that shows another node\'s new epoch also carries a claim whose rotation the cool-down refuses', () => {
  const d = caughtUpOnFour();
  // Another node made a new epoch (a claim there: the cool-down runs); this machine has not read since.
  d.inbox.epoch = 'ep2';
  d.inbox.coolingDown = true;
  // The looping client comes here with that epoch and its old last_seq, above the latest.
  d.login('b', { kind: 'after', seq: 9, epoch: 'ep2' });
  d.settle();
  assert.deepEqual(d.rotations, ['ep2'], 'asked once, refused');
  assert.deepEqual(d.brief('b'), ['welcome 1', 'reset ep2 4', 'msg 1', 'msg 2', 'msg 3', 'msg 4']);
  // Before, the page that reset `a` was dropped for the rotation, the machine kept ep1,
  // and the pull after the refusal reset `a` to ep2 a second time.
  assert.deepEqual(d.brief('a'), ['reset ep2 4', 'msg 1', 'msg 2', 'msg 3', 'msg 4'], 'one reset for one epoch change');
});
