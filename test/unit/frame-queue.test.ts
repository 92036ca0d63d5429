/**
 * The client-frame queue (src/gateway/frame-queue.ts): nothing handled before it is
 * opened, then every item in order, one at a time, an item whose handling is
 * asynchronous holding the later ones; at most `max` held.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FrameQueue } from '../../src/gateway/frame-queue.js';

test('items wait for open, then are handled in order; an async item holds the later ones until it settles', async () => {
  const handled: string[] = [];
  let finish: () => void = () => undefined;
  const q = new FrameQueue<string>(10, (item) => {
    handled.push(item);
    if (item !== 'slow') return undefined;
    return new Promise<void>((resolve) => {
      finish = resolve;
    });
  });
  assert.equal(q.push('a'), true);
  assert.equal(q.push('slow'), true);
  assert.equal(q.push('b'), true);
  assert.deepEqual(handled, [], 'nothing before open');
  q.open();
  assert.deepEqual(handled, ['a', 'slow'], 'b waits for slow');
  q.push('c');
  assert.deepEqual(handled, ['a', 'slow']);
  finish();
  await Promise.resolve();
  await new Promise<void>((resolve) => setImmediate(resolve));
  assert.deepEqual(handled, ['a', 'slow', 'b', 'c']);
  q.push('d');
  assert.deepEqual(handled, ['a', 'slow', 'b', 'c', 'd'], 'handled at once when nothing waits');
});

test('at most max items are held; stop drops them and handles nothing more', () => {
  const handled: number[] = [];
  const q = new FrameQueue<number>(3, (n) => {
    handled.push(n);
    return undefined;
  });
  assert.equal(q.push(1), true);
  assert.equal(q.push(2), true);
  assert.equal(q.push(3), true);
  assert.equal(q.push(4), false, 'the 4th is refused');
  q.stop();
  q.open();
  // Dropped, not refused: a refusal means too many held, which the caller closes 4003 for.
  assert.equal(q.push(5), true, 'a stopped queue drops an item without refusing it');
  assert.deepEqual(handled, []);
});

test('a stopped queue handles nothing more, an overtaking item behind a waiting one included, and refuses nothing however many come', () => {
  const handled: string[] = [];
  const q = new FrameQueue<string>(2, (item) => {
    handled.push(item);
    return item === 'slow' ? new Promise<void>(() => undefined) : undefined;
  }, (item) => item === 'ack');
  q.open();
  q.push('slow');
  q.push('ack');
  assert.deepEqual(handled, ['slow', 'ack'], 'an ack overtakes the waiting item');
  q.stop();
  for (let i = 0; i < 5; i++) assert.equal(q.push(i % 2 === 0 ? 'ack' : 'b'), true, `item ${i} after stop is dropped, not refused`);
  assert.deepEqual(handled, ['slow', 'ack']);
});
