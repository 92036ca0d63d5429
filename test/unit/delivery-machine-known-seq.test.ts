/**
 * The delivery machine's sign of an inbox Redis gave back with less (DESIGN.md §11;
 * src/delivery/epoch-guard.ts): a seq the node knows to name a message under the epoch,
 * found naming another one. The node knows the seqs it delivered and, since range-3.lua,
 * the inbox's newest entry of every read — so a connection whose position came from its
 * `last_seq` or its stored cursor, and which was sent nothing yet, is covered as one
 * that was delivered its messages live (a black-box tester's finding D5: a batch that
 * reached such a device's position before any read was delivered from past it, the
 * seqs assigned again up to it skipped with no `reset`). A read whose newest entry is
 * that seq naming another message (appends made on another node, which notify with
 * seqs only, ending there) shows it too.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ResumeRequest } from '../../src/delivery/machine.js';
import { CONFIG, Driver } from './machine-driver.js';

/** `msg 1` .. `msg n`. */
function msgs(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `msg ${i + 1}`);
}

/** An inbox of 6 in ep1, and connection `a` joined at `resume`: welcomed, sent nothing. */
function joinedAtSix(resume: ResumeRequest): Driver {
  const d = new Driver({ ...CONFIG, window: 10 });
  d.inbox.append(6);
  d.login('a', resume, 'phone');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 7']);
  return d;
}

/** Redis goes back to latest 3 (same epoch); then `n` appends made here land at once (one batch) and are offered one by one. */
function restoreThenBatch(d: Driver, n: number): void {
  d.inbox.restoreTo(3);
  const last = d.inbox.append(n);
  for (let seq = 4; seq <= last; seq++) d.offerAppended(seq);
  d.settle();
}

for (const [how, resume] of [
  ['its last_seq and epoch', { kind: 'after', seq: 6, epoch: 'ep1' }],
  ['its stored cursor', { kind: 'after', seq: 6 }],
  ['from=latest', { kind: 'latest' }],
] as const) {
  test(`a connection that started at 6 from ${how}, sent nothing: a batch at 4..8 after the inbox went back to 3 brings a new epoch, and it is reset and sent 1..8`, () => {
    const d = joinedAtSix(resume);
    restoreThenBatch(d, 5);
    assert.deepEqual(d.rotationCauses, ['delivered'], 'seq 6 came back as another message: one rotation');
    assert.deepEqual(d.brief('a'), ['reset ep1-rotated 8', ...msgs(8)]);
  });
}

test('a batch that ends exactly at the position (4..6) is a rotation too, not "nothing new"', () => {
  const d = joinedAtSix({ kind: 'after', seq: 6, epoch: 'ep1' });
  restoreThenBatch(d, 3);
  assert.deepEqual(d.rotationCauses, ['delivered']);
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 6', ...msgs(6)]);
});

test('a batch that stops short of the position (4..5): the read it makes finds the latest below it, a rotation', () => {
  const d = joinedAtSix({ kind: 'after', seq: 6, epoch: 'ep1' });
  restoreThenBatch(d, 2);
  assert.deepEqual(d.rotationCauses, ['delivered']);
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 5', ...msgs(5)]);
});

test('two connections at different positions, one sent up to 3 only (window 1, no ack), the other at 6 from its last_seq: the newest read (6), not the highest delivered (3), is the seq the batch is checked on', () => {
  const d = new Driver({ ...CONFIG, window: 1 });
  d.inbox.append(6);
  d.login('slow', { kind: 'after', seq: 2, epoch: 'ep1' }, 'watch');
  d.login('a', { kind: 'after', seq: 6, epoch: 'ep1' }, 'phone');
  d.settle();
  assert.deepEqual(d.brief('slow'), ['welcome 3', 'msg 3']);
  assert.deepEqual(d.brief('a'), ['welcome 7']);
  // Back to 4: what slow was sent (3) is still there; 5 and 6 are lost, then 5..7 land at once.
  d.inbox.restoreTo(4);
  const last = d.inbox.append(3);
  for (let seq = 5; seq <= last; seq++) d.offerAppended(seq);
  d.settle();
  assert.deepEqual(d.rotationCauses, ['delivered'], 'seq 6 came back as another message');
  // Each then gets its window (1) from seq 1 of the new epoch.
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 7', 'msg 1']);
  assert.deepEqual(d.brief('slow'), ['reset ep1-rotated 7', 'msg 1']);
});

test('appends made on another node ending exactly at the newest seq read (notifies with seqs only): the read they bring finds it naming another message, a rotation', () => {
  const d = joinedAtSix({ kind: 'after', seq: 6, epoch: 'ep1' });
  d.inbox.restoreTo(3);
  d.notify(d.inbox.append(3));
  d.settle();
  assert.deepEqual(d.rotationCauses, ['delivered']);
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 6', ...msgs(6)]);
});

test('no loss, no rotation: appends after the newest read, offered or notified, are delivered under the same epoch', () => {
  const d = joinedAtSix({ kind: 'after', seq: 6, epoch: 'ep1' });
  d.offer();
  d.notify(d.inbox.append(2));
  d.settle();
  d.heartbeat();
  d.settle();
  assert.deepEqual(d.rotations, []);
  assert.deepEqual(d.brief('a'), ['msg 7', 'msg 8', 'msg 9']);
});
