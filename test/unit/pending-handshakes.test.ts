/**
 * PendingHandshakes (src/gateway/pending-handshakes.ts): a kick that arrives while a
 * handshake is between presence and its open WebSocket marks only the handshakes it
 * names — the user's, narrowed to one connection or one device when the kick says so
 * (DELETE /v1/users/{uid}/connections?device=…, a device replaced by its own new
 * connection) — and the first kick stays. What reaches a real client is tested in
 * test/gateway/presence.test.ts; the window here is too short to aim a kick at.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PendingHandshakes } from '../../src/gateway/pending-handshakes.js';

const REPLACED = { code: 4002, reason: 'replaced' };
const KICKED = { code: 1008, reason: 'kicked' };

function three(): PendingHandshakes {
  const p = new PendingHandshakes();
  p.add('c1', 'ann', 'phone');
  p.add('c2', 'ann', 'web');
  p.add('c3', 'bob', 'phone');
  return p;
}

test('a kick naming a device marks only that device\'s handshakes of that user', () => {
  const p = three();
  p.kick({ user: 'ann', device: 'phone' }, KICKED);
  assert.deepEqual(p.settle('c1'), KICKED);
  assert.equal(p.settle('c2'), undefined, 'ann\'s other device is not kicked');
  assert.equal(p.settle('c3'), undefined, 'bob\'s phone is not kicked');
});

test('a kick naming a connection marks only it; one naming the user marks all the user\'s', () => {
  const p = three();
  p.kick({ user: 'ann', conn: 'c2' }, REPLACED);
  p.kick({ user: 'ann', conn: 'c3' }, REPLACED);
  assert.equal(p.settle('c1'), undefined);
  assert.deepEqual(p.settle('c2'), REPLACED);
  assert.equal(p.settle('c3'), undefined, 'a connection of another user is not reached through ann');
  const q = three();
  q.kick({ user: 'ann' }, KICKED);
  assert.deepEqual([q.settle('c1'), q.settle('c2'), q.settle('c3')], [KICKED, KICKED, undefined]);
});

test('the first kick stays, and a settled handshake is forgotten', () => {
  const p = three();
  p.kick({ user: 'ann', device: 'web' }, REPLACED);
  p.kick({ user: 'ann' }, KICKED);
  assert.deepEqual(p.settle('c2'), REPLACED);
  assert.equal(p.settle('c2'), undefined, 'settled once');
  assert.deepEqual(p.settle('c1'), KICKED);
});
