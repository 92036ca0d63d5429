/**
 * HandshakeSlots (src/gateway/handshake-slots.ts), the node's bound on WebSocket
 * handshakes in progress (`PIXIU_MAX_HANDSHAKES`): a slot is given back once, however
 * many of its handshake's ends call its release (the welcome sent, the refusal's answer
 * finished, the socket closed). Given back twice, one handshake's end freed another's
 * slot: the bound let one more handshake through for each, and `inUse` went below the
 * handshakes really in progress. End to end: test/gateway/handshake-bound.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HandshakeSlots } from '../../src/gateway/handshake-slots.js';
import { boundRefusal } from '../../src/gateway/handshake-refusals.js';
import { PixiuError } from '../../src/errors.js';

test('a slot released twice is given back once: the bound still holds for the handshakes in progress', () => {
  const slots = new HandshakeSlots(2);
  const first = slots.take();
  slots.take();
  first();
  first();
  assert.equal(slots.inUse, 1);
  slots.take();
  assert.equal(slots.inUse, 2);
  assert.throws(() => slots.take(), (err: unknown) => err instanceof PixiuError && err.code === 'UNAVAILABLE' && boundRefusal(err) === 'busy');
  assert.equal(slots.inUse, 2, 'a refused handshake takes no slot');
});
