/**
 * A kick for this node (src/gateway/kicks.ts `local`: from the bus, a DELETE, or a
 * handshake replacing a device's connection here) reaches the handshakes not open yet
 * (pending-handshakes.ts) as well as the open connections, each narrowed the same way:
 * to one connection, or one device, of the user. A pending handshake it missed opened
 * and stayed: a second socket for a replaced device, or a connection a DELETE closed.
 * End to end, the pending window is too short to aim a kick at (see
 * test/gateway/bus-malformed.test.ts, which reaches it from PendingHandshakes itself).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Kicks, type KickDeps } from '../../src/gateway/kicks.js';
import { PendingHandshakes } from '../../src/gateway/pending-handshakes.js';
import { createLogger } from '../../src/logger.js';

interface FakeConnection { id: string; device: string; closedWith?: number }

/** Kicks of node `here` over `handshakes` and ann's `open` connections (each records the code it is closed with). */
function kicksOn(handshakes: PendingHandshakes, open: FakeConnection[]): Kicks {
  const hub = {
    connectionsOf: (user: string) => (user === 'ann' ? open : []).map((c) => ({ ...c, close: (code: number) => { c.closedWith = code; } })),
  };
  return new Kicks({ node: 'here', handshakes, hub, accepting: () => true, logger: createLogger('silent') } as unknown as KickDeps);
}

test('a local kick marks the pending handshakes it names, as it closes the open connections it names', () => {
  const handshakes = new PendingHandshakes();
  handshakes.add('c-pending-phone', 'ann', 'phone');
  handshakes.add('c-pending-web', 'ann', 'web');
  handshakes.add('c-pending-other', 'ann', 'tablet');
  const open: FakeConnection[] = [{ id: 'c-open-phone', device: 'phone' }, { id: 'c-open-web', device: 'web' }];
  const kicks = kicksOn(handshakes, open);
  kicks.local({ t: 'kick', user: 'ann', conn: 'c-pending-phone', code: 4002, reason: 'replaced' });
  kicks.local({ t: 'kick', user: 'ann', device: 'web', code: 1008, reason: 'disconnected by the service' });
  assert.deepEqual(handshakes.settle('c-pending-phone'), { code: 4002, reason: 'replaced' });
  assert.deepEqual(handshakes.settle('c-pending-web'), { code: 1008, reason: 'disconnected by the service' });
  assert.equal(handshakes.settle('c-pending-other'), undefined);
  assert.deepEqual(open.map((c) => [c.id, c.closedWith]), [['c-open-phone', undefined], ['c-open-web', 1008]]);
});
