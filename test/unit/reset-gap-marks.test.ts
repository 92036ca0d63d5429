/**
 * The `trimmed` gap that follows a `reset` (seqs below the new epoch's first retained
 * one) is marked `redelivered` for the seqs the device is known to have had under the
 * old epoch — up to its position there, when the new epoch goes on from the old one's
 * numbering (src/inbox/lineage.ts) — and is news for the rest (docs/protocol.md "Why a
 * gap"; a black-box tester's finding J: a client following the docs showed nothing for
 * the whole gap, so a rotation hid seqs the device never had, and so did an inbox lost
 * and refilled past the cap). The machine driven by hand (machine-driver.ts), whose fake
 * inbox (fake-inbox.ts) records a rotation's lineage as rotate-7.lua does.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ResumeRequest } from '../../src/delivery/machine.js';
import { CONFIG, Driver } from './machine-driver.js';

const after = (seq: number, epoch?: string): ResumeRequest => (epoch === undefined ? { kind: 'after', seq } : { kind: 'after', seq, epoch });
const msgs = (from: number, to: number, mark = ''): string[] => Array.from({ length: to - from + 1 }, (_, i) => `msg ${from + i}${mark}`);
const WIDE = { ...CONFIG, window: 20 };

test('a rotation that keeps the numbering: a device behind the cap gets the seqs up to its last_seq marked, the ones it never had as news', () => {
  const d = new Driver(WIDE);
  d.inbox.append(12);
  d.inbox.trimTo(8); // the cap keeps 8..12
  // Another node rotated it (a claim, a generation): seqs 1..12 of ep1 go on under the new epoch.
  d.inbox.rotateEpoch('ep1', 'generation');
  d.login('phone', after(2, 'ep1'));
  d.settle();
  assert.deepEqual(d.brief('phone'), ['welcome 8', 'reset ep1-rotated 12', 'gap 1-2 trimmed r', 'gap 3-7 trimmed', ...msgs(8, 12)]);
});

test('a rotation a device\'s claim asks for: the claiming device had what the new epoch goes on from, another device back later only its own seqs', () => {
  const d = new Driver(WIDE);
  d.inbox.append(12);
  d.inbox.trimTo(8);
  d.login('tablet', after(99, 'ep1')); // above the latest: a new epoch
  d.settle();
  assert.deepEqual(d.rotations, ['ep1']);
  assert.deepEqual(d.brief('tablet'), ['welcome 8', 'reset ep1-rotated 12', 'gap 1-7 trimmed r', ...msgs(8, 12)]);
  d.login('phone', after(2, 'ep1'));
  d.settle();
  assert.deepEqual(d.brief('phone'), ['welcome 8', 'reset ep1-rotated 12', 'gap 1-2 trimmed r', 'gap 3-7 trimmed', ...msgs(8, 12)]);
});

test('the common failover: a device whose last_seq is past the new first retained seq gets the whole gap marked, then what it had again and what is new', () => {
  const d = new Driver(WIDE);
  d.inbox.append(12);
  d.inbox.trimTo(8);
  d.inbox.rotateEpoch('ep1', 'generation'); // pixiu redis lost-writes: the next append rotates, seqs go on
  d.inbox.append(1);
  d.inbox.trimTo(9);
  d.login('phone', after(12, 'ep1'));
  d.settle();
  assert.deepEqual(d.brief('phone'), ['welcome 9', 'reset ep1-rotated 13', 'gap 1-8 trimmed r', ...msgs(9, 13)]);
});

test('a restore behind a device: only the seqs up to what the new epoch goes on from are marked; those assigned since are news', () => {
  const d = new Driver(WIDE);
  d.inbox.append(12);
  d.inbox.restoreTo(10); // Redis lost 11 and 12
  d.inbox.rotateEpoch('ep1', 'generation'); // goes on from 10
  d.inbox.append(10); // 11..20, other messages than the device's 11 and 12
  d.inbox.trimTo(16);
  d.login('phone', after(12, 'ep1'));
  d.settle();
  assert.deepEqual(d.brief('phone'), ['welcome 16', 'reset ep1-rotated 20', 'gap 1-10 trimmed r', 'gap 11-15 trimmed', ...msgs(16, 20)]);
});

test('an inbox lost and refilled past the cap: nothing goes on from the old epoch, the whole gap is news', () => {
  const d = new Driver(WIDE);
  d.inbox.append(5);
  d.inbox.rotateEpoch('ep1'); // an old lineage, left in the meta hash
  d.inbox.recreate('ep-new');
  d.inbox.append(6);
  d.inbox.trimTo(2);
  d.login('phone', after(3, 'ep1-rotated'));
  d.settle();
  assert.deepEqual(d.brief('phone'), ['welcome 2', 'reset ep-new 6', 'gap 1-1 trimmed', ...msgs(2, 6)]);
});

test('two rotations since the device\'s epoch, or a reset under the same epoch: unknown, so news', () => {
  const d = new Driver(WIDE);
  d.inbox.append(12);
  d.inbox.trimTo(8);
  d.inbox.rotateEpoch('ep1');
  d.inbox.rotateEpoch('ep1-rotated');
  d.login('phone', after(2, 'ep1'));
  d.settle();
  assert.deepEqual(d.brief('phone'), ['welcome 8', 'reset ep1-rotated-rotated 12', 'gap 1-7 trimmed', ...msgs(8, 12)]);
  // A last_seq above the latest with no epoch: reset alone, the epoch stays; what it had is unknown.
  d.login('tablet', after(99));
  d.settle();
  assert.deepEqual(d.brief('tablet'), ['welcome 8', 'reset ep1-rotated-rotated 12', 'gap 1-7 trimmed', ...msgs(8, 12)]);
});

test('a connected device reset by a rotation made elsewhere: the seqs it was sent are marked, also when the cap trimmed past them', () => {
  const d = new Driver({ ...CONFIG, window: 5 });
  d.inbox.append(4);
  d.login('a');
  d.settle();
  d.ack('a', 4);
  d.settle();
  d.frames('a');
  // Another node rotates (a generation raise's append), then appends pass the cap.
  d.inbox.rotateEpoch('ep1', 'generation');
  d.inbox.append(8);
  d.inbox.trimTo(7);
  d.notify(12);
  d.settle();
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 12', 'gap 1-4 trimmed r', 'gap 5-6 trimmed', ...msgs(7, 11)]);
});

test('a claim\'s rotation made after appends passed the latest its read found: the seqs appended in between are news, not marked (rotate-7.lua bounds the lineage by that read\'s latest)', () => {
  // The delivfix model review's seed 681 (two nodes): the lineage went on from the
  // counter at rotation time, and 5, appended between the claim's read and the
  // rotation, was marked as the device's: it kept the lost 5, never shown the new one.
  const d = new Driver(WIDE);
  d.inbox.append(4); // Redis went back to 4: the tablet had 5
  d.login('tablet', after(5, 'ep1'));
  d.answer(); // latest 4 below its last_seq: a claim's rotation
  assert.deepEqual(d.rotationCauses, ['resume']);
  assert.deepEqual(d.rotationReads, [4]);
  d.inbox.append(4); // 5..8, on another node, before the rotation runs
  d.inbox.trimTo(7); // the cap
  d.rotated();
  assert.deepEqual(d.inbox.lineage, { epoch: 'ep1-rotated', replaced: 'ep1', through: 4 });
  d.settle();
  assert.deepEqual(d.brief('tablet'), ['welcome 7', 'reset ep1-rotated 8', 'gap 1-4 trimmed r', 'gap 5-6 trimmed', ...msgs(7, 8)],
    'before: gap 1-5 marked, the new 5 taken for the lost one the tablet had');
});
