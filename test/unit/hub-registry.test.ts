/**
 * The hub's registry of this node's users and connections (src/delivery/hub.ts): a
 * connection detached is forgotten, and a user whose last connection here closed (with
 * no ack left unwritten) leaves no session behind, so a node's memory follows the
 * users connected now, not every user it ever served. The inbox and the store are
 * stand-ins; the hub, the sessions and the machine are the real ones.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Inbox, InboxPage } from '../../src/inbox/inbox.js';
import type { RecordReader } from '../../src/store/record-reader.js';
import { Hub } from '../../src/delivery/hub.js';
import type { DeliveryConnection } from '../../src/delivery/session.js';
import { createLogger } from '../../src/logger.js';
import { waitUntil } from '../harness/checks.js';
import { CONFIG } from './machine-driver.js';

test('detached connections and users whose last connection closed are forgotten', async () => {
  // Mutants killed: detach without `#owners.delete` (every connection id kept for good)
  // and without `#sessions.delete` (every user's session kept for good).
  const EMPTY: InboxPage = { epoch: 'A', firstSeq: 1, latestSeq: 0, entries: [] };
  const inbox = { range: async () => EMPTY } as unknown as Inbox;
  const store: RecordReader = { isOpen: true, get: async () => null, getMany: async () => [] };
  const hub = new Hub({ inbox, store, machine: CONFIG, logger: createLogger('silent'), retryMs: 20 }, 100);
  const welcomed = new Set<string>();
  const conn = (id: string): DeliveryConnection => ({ id, device: id, send: (text) => { if (text.includes('"welcome"')) welcomed.add(id); }, close: () => undefined });
  hub.attach('u', conn('a'), { kind: 'first' });
  hub.attach('u', conn('b'), { kind: 'first' });
  hub.attach('v', conn('c'), { kind: 'first' });
  await waitUntil('three welcomes', async () => welcomed.size === 3, 5000, 5);
  assert.deepEqual([hub.users, hub.connections], [2, 3]);
  assert.equal(hub.connection('b')?.id, 'b', 'by its id, not the user\'s first');
  hub.detach('u', 'a');
  assert.deepEqual([hub.users, hub.connections], [2, 2]);
  assert.equal(hub.connection('a'), undefined);
  assert.equal(hub.connection('b')?.id, 'b');
  hub.detach('u', 'b');
  assert.deepEqual([hub.users, hub.connections, hub.has('u')], [1, 1, false]);
  assert.deepEqual(hub.connectionsOf('u'), []);
  hub.detach('v', 'c');
  assert.deepEqual([hub.users, hub.connections, hub.has('v')], [0, 0, false]);
});
