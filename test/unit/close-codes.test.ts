/**
 * The `code` label of `pixiu_ws_closes_total` (src/delivery/close-codes.ts
 * `closeCodeLabel`): every RFC 6455 code 1000–1015 and each of Pixiu's own codes is
 * its own label; any other code a client picks (3000–4999) is `other`, so a client
 * cannot grow the metric's series without end.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CloseCode, closeCodeLabel } from '../../src/delivery/close-codes.js';

test('close codes 1000 to 1015 and Pixiu\'s own are labelled by their number; any other code is "other"', () => {
  // Mutant killed: the RFC range cut to 1000–1014 (`length: 16` → 15): 1015 (TLS
  // handshake failure, reported by `ws`) counted as `other`.
  for (let code = 1000; code <= 1015; code++) assert.equal(closeCodeLabel(code), String(code));
  for (const code of Object.values(CloseCode)) assert.equal(closeCodeLabel(code), String(code));
  for (const code of [999, 1016, 3000, 4000, 4004, 4999]) assert.equal(closeCodeLabel(code), 'other', `code ${code}`);
});

test('the close codes are those DESIGN.md §6 names', () => {
  assert.deepEqual(
    { ...CloseCode },
    { normal: 1000, goingAway: 1001, policy: 1008, tooBig: 1009, abnormal: 1006, tokenExpired: 4001, replaced: 4002, protocolAbuse: 4003, ackTimeout: 4008, slowConsumer: 4009 },
  );
});
