/**
 * A connection whose `welcome` (or last `reset`) said `epoch: null` — the user had no
 * inbox then — is told the epoch by the first `msg` it gets (docs/protocol.md, `msg`):
 * without it, a client that resumed later with `last_seq` alone was not protected by
 * the epoch, and an inbox recreated since resumed after that seq silently (a mobile SDK
 * tester lost 94 messages so). Only that first `msg` carries it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ServerFrame } from '../../src/delivery/frames.js';
import { Driver } from './machine-driver.js';

/** `epoch` of each msg frame, in order (undefined where it has none). */
function msgEpochs(frames: ServerFrame[]): Array<string | undefined> {
  return frames.filter((f) => f.t === 'msg').map((f) => (f as { epoch?: string }).epoch);
}

test('welcomed before the inbox exists: the first msg, read by a pull, names the epoch; the next ones do not', () => {
  const d = new Driver();
  d.inbox.recreate(null);
  d.login('a');
  d.settle();
  assert.equal((d.frames('a')[0] as { epoch: string | null }).epoch, null);
  d.inbox.append(2);
  d.notify(2);
  d.settle();
  const epoch = d.inbox.epoch;
  assert.ok(epoch !== null);
  assert.deepEqual(msgEpochs(d.frames('a')), [epoch, undefined]);
  d.ack('a', 2);
  d.inbox.append();
  d.notify(3);
  d.settle();
  assert.deepEqual(msgEpochs(d.frames('a')), [undefined]);
});

test('welcomed before the inbox exists: the first msg handed over live (offer) names the epoch', () => {
  const d = new Driver();
  d.inbox.recreate(null);
  d.login('a');
  d.settle();
  d.frames('a');
  d.offer();
  d.offer();
  assert.deepEqual(msgEpochs(d.frames('a')), [d.inbox.epoch, undefined]);
});

test('welcomed with an epoch: no msg repeats it; a second connection welcomed after the inbox exists gets none either', () => {
  const d = new Driver();
  d.inbox.recreate(null);
  d.login('a');
  d.settle();
  d.offer();
  d.login('b');
  d.settle();
  const b = d.frames('b');
  assert.equal((b[0] as { epoch: string | null }).epoch, d.inbox.epoch);
  assert.deepEqual(msgEpochs(b), [undefined]);
  assert.deepEqual(msgEpochs(d.frames('a')), [d.inbox.epoch]);
});

test('a reset to epoch null (Redis lost the inbox, nothing appended since): the first msg after it names the new epoch', () => {
  const d = new Driver();
  d.inbox.append(2);
  d.login('a');
  d.settle();
  d.ack('a', 2);
  d.frames('a');
  d.inbox.recreate(null);
  d.heartbeat();
  d.settle();
  const reset = d.frames('a');
  assert.deepEqual(reset.map((f) => [f.t, (f as { epoch?: string | null }).epoch]), [['reset', null]]);
  d.inbox.append();
  d.notify(1);
  d.settle();
  const after = d.frames('a');
  assert.ok(d.inbox.epoch !== null);
  assert.deepEqual(msgEpochs(after), [d.inbox.epoch]);
});

test('welcomed before the inbox exists, a first seq whose content expired goes out as a gap naming the epoch; the msg after it does not', () => {
  const d = new Driver();
  d.inbox.recreate(null);
  d.login('a');
  d.settle();
  d.frames('a');
  d.inbox.append(2);
  d.inbox.expire(1);
  d.notify(2);
  d.settle();
  const frames = d.frames('a');
  assert.deepEqual(frames.map((f) => [f.t, (f as { epoch?: string }).epoch]), [['gap', d.inbox.epoch], ['msg', undefined]]);
});
