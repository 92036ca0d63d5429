/**
 * The ordering of a batch's appends (src/ingest/recipient-order.ts, DESIGN.md §7): a
 * message goes once it is ready and every earlier message naming one of its recipients
 * has gone; messages with no recipient in common do not wait for each other. The
 * messages are released here in a chosen order (their stores ending out of batch
 * order), which the end-to-end batch tests cannot choose.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RecipientOrder } from '../../src/ingest/recipient-order.js';

/** Releases the messages of `named` in the order `readyOrder`; answers the order they went in. */
function goOrder(named: string[][], readyOrder: number[]): number[] {
  const order = new RecipientOrder(named);
  const went: number[] = [];
  for (const i of readyOrder) order.release(i, () => went.push(i));
  return went;
}

test('independent only when no recipient is named twice', () => {
  assert.equal(new RecipientOrder([['a'], ['b'], ['c', 'd']]).independent, true);
  assert.equal(new RecipientOrder([]).independent, true);
  assert.equal(new RecipientOrder([['a', 'b'], ['c'], ['b']]).independent, false, 'b in the first and last');
});

test('a message ready before an earlier one to the same user waits for it, then goes at once', () => {
  const order = new RecipientOrder([['a'], ['a']]);
  const went: number[] = [];
  order.release(1, () => went.push(1));
  assert.equal(went.length, 0, 'the second waits: the first to a has not gone');
  order.release(0, () => went.push(0));
  assert.deepEqual(went, [0, 1], 'the first goes, and the second right after it');
});

test('per recipient in batch order whatever order they are ready in; a chain of three goes in one release', () => {
  assert.deepEqual(goOrder([['a'], ['a'], ['a']], [2, 1, 0]), [0, 1, 2]);
  assert.deepEqual(goOrder([['a'], ['a'], ['a']], [1, 2, 0]), [0, 1, 2]);
  assert.deepEqual(goOrder([['a'], ['a'], ['a']], [0, 2, 1]), [0, 1, 2]);
});

test('messages with no recipient in common do not wait for each other', () => {
  // 1 (to b) goes as soon as it is ready, ahead of 0 (to a); 2 (to a) waits for 0.
  assert.deepEqual(goOrder([['a'], ['b'], ['a']], [2, 1, 0]), [1, 0, 2]);
});

test('a message naming several users waits for the earlier message of each of them', () => {
  // 2 names a and b: it waits for 0 (to a) and for 1 (to b), whichever is ready last.
  const order = new RecipientOrder([['a'], ['b'], ['a', 'b'], ['b']]);
  const went: number[] = [];
  order.release(3, () => went.push(3));
  order.release(2, () => went.push(2));
  order.release(0, () => went.push(0));
  assert.deepEqual(went, [0], '2 still waits for 1 (to b), and 3 for 2');
  order.release(1, () => went.push(1));
  assert.deepEqual(went, [0, 1, 2, 3]);
});

test('a message with no recipients goes when ready; every message goes once', () => {
  const order = new RecipientOrder([['a'], [], ['a']]);
  const went: number[] = [];
  order.release(2, () => went.push(2));
  order.release(1, () => went.push(1));
  order.release(0, () => went.push(0));
  assert.deepEqual(went, [1, 0, 2]);
});
