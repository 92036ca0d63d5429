/**
 * The delivery machine's signs of an inbox Redis gave back with less (DESIGN.md §11;
 * src/delivery/epoch-guard.ts) when what it delivers was read, or appended, before the
 * loss and reaches it after (a model review's finding S1, high; S3, S4): a page read
 * before Redis went back, delivered after a batch made here took the lost seqs again;
 * an offered append made just before the loss, delivered after such a batch; a page
 * read before the loss delivered after appends on another node; the newest seq known
 * above what a later read finds; the read that shows the loss answered after the
 * user's last connection here left; a rotation that a second loss undid. In each, the
 * device was sent the old messages at those seqs and never the new ones, with no
 * `reset`: under one epoch a seq names one message, so two MsgIDs at one seq, or a
 * latest below a seq known, prove the loss.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CONFIG, Driver, FIRST } from './machine-driver.js';

/** `msg 1` .. `msg n`. */
function msgs(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `msg ${i + 1}`);
}

/** Connection `a` of an inbox of 3 in ep1, sent 1..3 (window 10). */
function liveOnThree(): Driver {
  const d = new Driver({ ...CONFIG, window: 10 });
  d.inbox.append(3);
  d.login('a', FIRST, 'phone');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', ...msgs(3)]);
  return d;
}

for (const n of [3, 5]) {
  test(`a page read before Redis went back, delivered after a batch of ${n} made here took the lost seqs again: a rotation, not the old messages`, () => {
    const d = liveOnThree();
    d.notify(d.inbox.append(2)); // 4 and 5, appended on another node: the pull reads them
    assert.ok(d.pending, 'the read of 4 and 5 is in flight (its content is being read)');
    // Meanwhile Redis goes back to 3 and a batch made here lands at 4.., each offered
    // while the read is in flight (a plain notify each: no delivery without a read).
    d.inbox.restoreTo(3);
    const last = d.inbox.append(n);
    for (let seq = 4; seq <= last; seq++) d.offerAppended(seq);
    d.settle();
    assert.deepEqual(d.rotationCauses, ['delivered'], 'seqs 4 and 5 named two messages each');
    assert.deepEqual(d.brief('a'), [`reset ep1-rotated ${last}`, ...msgs(last)], 'before: msg 4 and 5 of the lost messages, the new ones skipped');
  });
}

test('an offered append made just before Redis went back, delivered after a batch made here took its seq again: a rotation', () => {
  const d = liveOnThree();
  // Seq 4 is appended here; its delivery waits for a turn with room (send-turns.ts).
  d.offer(undefined, true);
  assert.ok(d.pending?.effect.offered, 'the offered delivery of 4 waits');
  d.inbox.restoreTo(3); // 4 lost
  const last = d.inbox.append(3); // 4..6 again, here
  for (let seq = 4; seq <= last; seq++) d.offerAppended(seq);
  d.settle();
  assert.deepEqual(d.rotationCauses, ['delivered']);
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 6', ...msgs(6)], 'before: the lost 4, then 5 and 6, the new 4 skipped');
});

test('a page read before Redis went back, delivered after another node took a lost seq again: the next read\'s latest is below the newest seq known, a rotation', () => {
  const d = new Driver({ ...CONFIG, window: 1 });
  d.inbox.append(3);
  d.login('a', { kind: 'after', seq: 2, epoch: 'ep1' }, 'phone');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 3', 'msg 3']);
  d.notify(d.inbox.append(2)); // 4 and 5, on another node
  d.ack('a', 3); // the read of 4 (window 1; newest 5) is in flight
  assert.ok(d.pending);
  d.inbox.restoreTo(3);
  d.notify(d.inbox.append()); // the new 4, on another node: a notify of a seq not new
  d.answer(); // the lost 4 is sent; the pull after it reads latest 4, the newest known 5
  d.settle();
  assert.deepEqual(d.rotationCauses, ['delivered'], 'before: no sign (latest 4, sent 4), the new 4 skipped');
  assert.deepEqual(d.brief('a'), ['msg 4', 'reset ep1-rotated 4', 'msg 1']);
});

test('a connection stuck below the newest seq read (window full) when a batch stops short of it: the read\'s latest below that seq is a rotation', () => {
  const d = new Driver({ ...CONFIG, window: 3 });
  d.inbox.append(6);
  d.login('a', FIRST, 'phone');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', ...msgs(3)], 'the read knew 6 as the newest');
  d.inbox.restoreTo(3);
  d.notify(d.inbox.append(2)); // 4 and 5 again, on another node: not new
  d.ack('a', 3); // the pull: latest 5, below the newest read (6)
  d.settle();
  assert.deepEqual(d.rotationCauses, ['delivered'], 'before: msg 4 and 5 under ep1, no rotation (latest 5 above sent 3, newest 5 below 6): a device offline with last_seq 6 of ep1 would skip the new 4 and 5 once appends passed 6');
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 5', ...msgs(3)]);
});

test('the read that shows the loss answered after the user\'s last connection left: judged against the seqs known, the rotation is asked for with no connection', () => {
  const d = liveOnThree();
  d.inbox.restoreTo(1);
  d.heartbeat(); // reads latest 1 (below 3, sent)
  assert.ok(d.pending);
  d.take(d.m.logout('a'));
  d.answer();
  assert.deepEqual(d.rotationCauses, ['delivered'], 'before: judged against no connection, nothing');
  assert.equal(d.m.rotationPending, true, 'the session owes it: the hub keeps it');
  d.rotated();
  assert.equal(d.inbox.epoch, 'ep1-rotated');
  assert.equal(d.pending, undefined, 'nothing read for nobody');
});

test('a rotation made, then undone by a second loss before the pull after it read (the old epoch back, with an append made meanwhile): asked for again', () => {
  const d = liveOnThree();
  d.inbox.restoreTo(1);
  d.notify(d.inbox.append(2)); // 2 and 3 again, on another node
  d.answer(); // the newest entry, 3, names another message: a rotation
  assert.deepEqual(d.rotationCauses, ['delivered']);
  d.inbox.append(); // 4, on another node, before the rotation
  // Redis makes the rotation, then goes back to a snapshot taken before it: ep1, latest 4.
  d.rotating = false;
  d.inbox.rotateEpoch('ep1');
  d.inbox.epoch = 'ep1';
  d.take(d.m.epochRotated('made'));
  d.settle();
  assert.deepEqual(d.rotationCauses, ['delivered', 'delivered'], 'before: ep1 read again and kept (latest 4 above sent 3), msg 4 sent, the new 2 and 3 skipped');
  assert.equal(d.inbox.epoch, 'ep1-rotated-again');
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated-again 4', ...msgs(4)]);
});

test('a rotation made and taken, then undone by a second loss (the replaced epoch read again later): asked for again, and the device reset once, to the newest epoch', () => {
  const d = liveOnThree();
  d.inbox.restoreTo(1);
  d.heartbeat();
  d.settle(); // latest 1 below 3: ep1 → ep1-rotated, a reset to it
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 1', 'msg 1']);
  d.ack('a', 1);
  // Redis goes back to a snapshot from before the rotation, with 2..4 appended on ep1 since.
  d.inbox.epoch = 'ep1';
  d.notify(d.inbox.append(3));
  d.settle();
  assert.deepEqual(d.rotationCauses, ['delivered', 'delivered'], 'before: ep1 taken back as another node\'s new epoch');
  assert.equal(d.inbox.epoch, 'ep1-rotated-again');
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated-again 4', ...msgs(4)], 'one reset, not one to ep1 and another after');
});

test('two appends offered while one read is in flight, the same seq naming two messages (Redis lost the first in between): a rotation', () => {
  const d = liveOnThree();
  d.heartbeat();
  assert.ok(d.pending, 'a read is in flight');
  d.offer(); // 4, here
  d.inbox.restoreTo(3);
  d.offer(); // 4 again, another message
  assert.deepEqual(d.rotationCauses, ['delivered'], 'before: nothing (the read, made before both, shows neither)');
  d.settle();
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 4', ...msgs(4)]);
});

test('the first read of a session made by a connection that just came, read before Redis went back and answered after an append here took a lost seq again: a rotation, not the lost message', () => {
  // The model review's delivfix seed 519: the machine knew no epoch yet, so the append
  // offered while its first read was in flight was neither kept nor checked.
  const d = new Driver({ ...CONFIG, window: 10 });
  d.inbox.append(6);
  d.login('a', { kind: 'after', seq: 4, epoch: 'ep1' }, 'phone');
  assert.ok(d.pending, 'the first read, of 5 and 6, is in flight');
  d.inbox.restoreTo(5); // 6 lost
  d.offerAppended(d.inbox.append()); // the new 6, appended here
  d.settle();
  assert.deepEqual(d.rotationCauses, ['delivered'], 'before: no rotation, the lost 6 sent and the new 6 skipped');
  assert.deepEqual(d.brief('a'), ['welcome 1', 'reset ep1-rotated 6', ...msgs(6)]);
});

test('a page read from an inbox trimmed past the read\'s start, answered after appends here took its lost seqs again: a rotation, whatever seq the offers land on', () => {
  // The delivfix2 model's seeds 1484 and 1748 (two nodes): the offers made while the read
  // ran were kept only for the seqs after its start within the entries it asked for, but
  // a page of a trimmed inbox starts at its first retained seq, far above that start.
  const d = new Driver({ ...CONFIG, window: 3 });
  d.inbox.append(2);
  d.login('a', FIRST, 'phone');
  d.settle();
  d.ack('a', 2);
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'msg 2']);
  d.inbox.append(10); // 3..12, on another node
  d.inbox.trimTo(8); // the cap
  d.notify(12);
  assert.deepEqual(d.pending?.snapshot.page.entries.map((e) => e.seq), [8, 9, 10], 'the read after 2 holds 8..10');
  d.inbox.restoreTo(9); // 10..12 lost
  for (let seq = 10, last = d.inbox.append(3); seq <= last; seq++) d.offerAppended(seq); // 10..12 again, here
  d.inbox.append(5); // 13..17, on another node (its notify late)
  d.inbox.trimTo(13); // the cap again: the seqs taken again are gone from the stream
  d.settle();
  assert.deepEqual(d.rotationCauses, ['delivered'], 'before: no rotation, the lost 10 sent, the new 10..12 skipped');
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 17', 'gap 1-12 trimmed', 'msg 13', 'msg 14', 'msg 15']);
});
