/**
 * The words of `/readyz` for a store that takes no messages, or some of them: the whole
 * store when its writes are suspended, else the partitions out of writes, named, with
 * the node's other partitions said to have no write failed or stalled yet (an operator
 * saw "the message store takes no messages now" while one partition was out and the
 * others answered 201; a tester read "the others take theirs" as the node still taking
 * most messages while one frozen disk stalled them all).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeProblemWords } from '../../src/store/write-problem.js';

const REOPENING = (p: number) => ({ index: p, reason: `message store partition ${p} is reopening its database after a failed write` });

test('a store that takes every message has no readiness problem', () => {
  assert.equal(writeProblemWords(undefined, [], 8), undefined);
});

test('suspended writes are the whole store\'s, whatever its partitions say', () => {
  assert.equal(writeProblemWords('message store writes are suspended: x', [REOPENING(4)], 8),
    'the message store takes no messages now: message store writes are suspended: x');
});

test('one partition out of writes is named, and the others are said to have no write failed or stalled yet', () => {
  assert.equal(writeProblemWords(undefined, [REOPENING(4)], 8),
    'message store partition 4 takes no messages now (no write failed or stalled yet on this node\'s other 7 partitions): '
    + 'message store partition 4 is reopening its database after a failed write');
  assert.equal(writeProblemWords(undefined, [REOPENING(9)], 2),
    'message store partition 9 takes no messages now (no write failed or stalled yet on this node\'s other partition): '
    + 'message store partition 9 is reopening its database after a failed write');
});

test('several partitions out of writes are all named, with each one\'s reason', () => {
  assert.equal(writeProblemWords(undefined, [REOPENING(3), REOPENING(4)], 8),
    'message store partitions 3, 4 take no messages now (no write failed or stalled yet on this node\'s other 6 partitions): '
    + 'message store partition 3 is reopening its database after a failed write; '
    + 'message store partition 4 is reopening its database after a failed write');
  assert.equal(writeProblemWords(undefined, [REOPENING(0)], 1),
    'message store partition 0 takes no messages now: message store partition 0 is reopening its database after a failed write');
});
