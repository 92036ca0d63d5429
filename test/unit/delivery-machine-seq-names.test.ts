/**
 * The epoch guard remembers which message each of the last seqs it knows names, not
 * only the highest (src/delivery/seq-names.ts; docs/decisions.md "Redis with less than
 * it had"): after Redis gave the inbox back with less, appends made here can land on
 * seqs delivered below the highest one, and their offers, or a redelivery's page, can
 * reach the machine after a read has moved the highest seq up again. Before, only the
 * highest seq and its MsgID were kept: the device was sent the lost messages at those
 * seqs and never the new ones, with no `reset` (the delivfix model review's seeds 671
 * and 484, one node).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CONFIG, Driver, FIRST } from './machine-driver.js';
import { nameHash, SEQ_NAMES, SeqNames } from '../../src/delivery/seq-names.js';

/** `msg from` .. `msg to`. */
function msgs(from: number, to: number): string[] {
  return Array.from({ length: to - from + 1 }, (_, i) => `msg ${from + i}`);
}

/** Connection `a` (window 10) of an inbox of `n` in ep1, sent 1..n in one page. */
function liveOn(n: number): Driver {
  const d = new Driver({ ...CONFIG, window: 10 });
  d.inbox.append(n);
  d.login('a', FIRST, 'phone');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', ...msgs(1, n)]);
  return d;
}

test('appends made here after Redis went back, offered only after a read passed the highest seq known again: their seqs were delivered as other messages, a rotation', () => {
  const d = liveOn(3);
  d.inbox.restoreTo(0); // 1..3 lost
  d.inbox.append(8); // made here; their answers (and offers) come late
  d.heartbeat(); // a read of 4..8 answered first: its latest and newest show nothing
  d.settle();
  assert.deepEqual(d.rotationCauses, [], 'nothing shows it yet');
  for (let seq = 1; seq <= 8; seq++) d.offerAppended(seq);
  d.settle();
  assert.deepEqual(d.rotationCauses, ['delivered'], 'before: none, the new 1..3 never sent');
  assert.deepEqual(d.brief('a'), [...msgs(4, 8), 'reset ep1-rotated 8', ...msgs(1, 8)]);
});

test('a redelivery reads another message at a seq it delivered (Redis went back and another node took the seq again): a rotation, not the new message marked redelivered', () => {
  const d = liveOn(4);
  d.inbox.restoreTo(3); // 4 lost
  d.inbox.append(2); // 4 and 5 again, on another node (its notify lost)
  d.due('a'); // no ack: the redelivery round reads 1..5
  d.settle();
  assert.deepEqual(d.rotationCauses, ['delivered'], 'before: msg 1..3 r, then the new 4 marked redelivered and 5: the device never shown the new 4');
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 5', ...msgs(1, 5)]);
});

test('SeqNames: the highest seq by its MsgID, the ones below by a hash, none skipped over or fallen out', () => {
  const id = (n: number): string => n.toString(16).padStart(16, '0');
  const k = new SeqNames(3, id(3));
  assert.equal(k.namesOther(3, id(3)), false);
  assert.equal(k.namesOther(3, id(33)), true);
  k.record(1, id(1));
  k.record(6, id(6)); // 4 and 5 skipped over: not known
  assert.equal(k.top, 6);
  assert.equal(k.namesOther(1, id(11)), true);
  assert.equal(k.namesOther(1, id(1)), false);
  assert.equal(k.namesOther(4, id(44)), false, 'never recorded');
  assert.equal(k.namesOther(7, id(77)), false, 'above the highest');
  k.record(6 + SEQ_NAMES, id(6 + SEQ_NAMES)); // every slot falls out
  assert.equal(k.namesOther(6, id(66)), false);
  assert.equal(k.namesOther(6 + SEQ_NAMES, id(1)), true);
  k.record(8 + SEQ_NAMES, id(8)); // the slot 7 + SEQ_NAMES shares with 7 is cleared
  assert.equal(k.namesOther(7 + SEQ_NAMES, id(5)), false);
  assert.ok(nameHash('') > 0 && nameHash(id(1)) < 2 ** 32, 'never 0, 32 bits');
});

test('every seq a page delivered is known, not only its last: an append made here after Redis went back, landing on a seq delivered in the middle of a page and offered after a read passed the top, is a rotation', () => {
  // Before, the guard was told only the last entry of each delivery (page-delivery.ts),
  // so seqs 1 and 2 of a page of 1..3 were not known: an append at 2 named nothing.
  const d = liveOn(3); // one page of 1..3
  d.inbox.restoreTo(1); // 2 and 3 lost
  const here = d.inbox.append(); // 2 again, made here; its answer (and offer) comes late
  d.inbox.append(3); // 3..5, on another node (its notify names no MsgID)
  d.heartbeat(); // the read of 4 and 5: latest 5 above 3, newest 5 unknown
  d.settle();
  assert.deepEqual(d.rotationCauses, [], 'nothing shows it yet');
  d.offerAppended(here);
  d.settle();
  assert.deepEqual(d.rotationCauses, ['delivered'], 'before: none, the device keeps the lost 2 and 3');
  assert.deepEqual(d.brief('a'), [...msgs(4, 5), 'reset ep1-rotated 5', ...msgs(1, 5)]);
});

test('a notify naming the MsgID another node appended at a seq delivered here as another message (Redis went back, the appends passed the top before a read): a rotation', () => {
  // The delivfix2 model's seeds 407, 875, 1249, 1593, 1945 (two nodes): the notify
  // carried only the seq, and the pull after it read past the device's position.
  const d = liveOn(5);
  d.inbox.restoreTo(3); // 4 and 5 lost
  d.inbox.append(3); // 4..6 again, on another node
  d.take(d.m.notify(4, d.inbox.idOf(4)));
  assert.deepEqual(d.rotationCauses, ['delivered'], 'before: a pull after 5, msg 6 alone, the new 4 and 5 never shown');
  d.settle();
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 6', ...msgs(1, 6)]);
});

test('a notify with a MsgID that comes while a read made before Redis went back is in flight: its page, naming another message at that seq, is not delivered', () => {
  const d = liveOn(3);
  d.notify(d.inbox.append(2)); // 4 and 5, on another node: the read is in flight
  assert.ok(d.pending);
  d.inbox.restoreTo(3);
  d.inbox.append(3); // 4..6 again, on another node
  d.take(d.m.notify(4, d.inbox.idOf(4))); // 4 is not known yet: kept for the page
  d.settle();
  assert.deepEqual(d.rotationCauses, ['delivered'], 'before: the lost 4 and 5 sent, then 6');
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 6', ...msgs(1, 6)]);
});

test('a notify with the MsgID of the message the node knows at that seq, or of a seq it does not know, proves nothing', () => {
  const d = liveOn(3);
  d.take(d.m.notify(3, d.inbox.idOf(3))); // late, of a seq delivered: the same message
  const last = d.inbox.append(2);
  d.take(d.m.notify(last, d.inbox.idOf(last))); // new
  d.settle();
  assert.deepEqual(d.rotationCauses, []);
  assert.deepEqual(d.brief('a'), msgs(4, 5));
});

test('SeqNames: a seq recorded late exactly SEQ_NAMES below the highest is not kept (its slot is the highest one\'s), and the 63 below the highest are', () => {
  const id = (n: number): string => n.toString(16).padStart(16, '0');
  const k = new SeqNames(100, id(100));
  k.record(100 - SEQ_NAMES, id(100 - SEQ_NAMES)); // a delivery far behind the newest read: falls out
  k.record(101, id(101)); // the highest moves on: 100 is known by its hash now
  assert.equal(k.names(100, id(100)), true, 'before: slot 100 held the hash of 36');
  assert.equal(k.namesOther(100, id(100)), false, 'before: a sign of a loss that never was');
  assert.equal(k.names(100 - SEQ_NAMES, id(100 - SEQ_NAMES)), false);

  // The module comment's 64: the highest and the 63 below it.
  assert.equal(SEQ_NAMES, 64);
  const w = new SeqNames(1, id(1));
  for (let seq = 2; seq <= 64; seq++) w.record(seq, id(seq));
  assert.equal(w.namesOther(1, id(1001)), true, 'seq 1, 63 below the highest, still known');
  w.record(65, id(65));
  assert.equal(w.namesOther(1, id(1001)), false, 'fallen out');
  assert.equal(w.namesOther(2, id(1002)), true);
});

test('SeqNames: MsgIDs with the same hex digits in another order are told apart below the highest (the hash mixes in each position)', () => {
  const k = new SeqNames(1, '0000000000000012');
  k.record(2, '00000000000000ab');
  k.record(3, '0000000000000100');
  assert.equal(k.namesOther(1, '0000000000000021'), true);
  assert.equal(k.namesOther(2, '00000000000000ba'), true);
  assert.equal(k.namesOther(1, '0000000000000012'), false);
  const all = new Set(Array.from({ length: 4096 }, (_, i) => nameHash(i.toString(16).padStart(16, '0'))));
  assert.equal(all.size, 4096, 'the MsgIDs of one partition\'s 4,096 first messages hash apart');
});
