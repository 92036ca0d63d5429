/**
 * The hub's shutdown flush (src/delivery/hub.ts `flushAll`, DESIGN.md §6 "On SIGTERM:
 * … flush ack cursors"): it writes the acks of every session it holds, those of a user
 * who left this node while a write of them had failed (Redis down then) included; and
 * a reconnect's flush (`flushAcks`, before the new connection reads the cursors) writes
 * those too. The inbox is a stand-in whose first ack write fails; the hub, the
 * sessions and the machine are the real ones.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Inbox, InboxPage } from '../../src/inbox/inbox.js';
import type { RecordReader } from '../../src/store/record-reader.js';
import type { StoredMessage } from '../../src/store/record.js';
import { Hub } from '../../src/delivery/hub.js';
import { createLogger } from '../../src/logger.js';
import { waitUntil } from '../harness/checks.js';
import { CONFIG } from './machine-driver.js';

const id = (n: number): string => n.toString(16).padStart(16, '0');

/** User u acked msg 1 on its one connection and left; the write of that ack failed (Redis down), the next ones succeed. */
async function leftWithAckFailing(): Promise<{ hub: Hub; writes: Array<{ device: string; seq: number; ok: boolean }> }> {
  const page: InboxPage = { epoch: 'A', firstSeq: 1, latestSeq: 1, entries: [{ seq: 1, id: id(1), kind: 1 }] };
  const writes: Array<{ device: string; seq: number; ok: boolean }> = [];
  const inbox = {
    range: async (_u: string, after: number): Promise<InboxPage> => ({ ...page, entries: page.entries.filter((e) => e.seq > after) }),
    ack: async (_u: string, device: string, seq: number): Promise<number> => {
      const ok = writes.length > 0; // the first write fails: Redis down
      writes.push({ device, seq, ok });
      if (!ok) throw new Error('redis down');
      return seq;
    },
  } as unknown as Inbox;
  const record: StoredMessage = { id: id(1), kind: 1, type: 't', data: {}, ts: 1, expiresAt: Number.MAX_SAFE_INTEGER };
  const store: RecordReader = { isOpen: true, get: async () => null, getMany: async (ids: readonly string[]) => ids.map(() => record) };
  // A retry a minute away (and unref'd): only the hub's flushes can write in time.
  const hub = new Hub({ inbox, store, machine: { ...CONFIG, window: 10 }, logger: createLogger('silent'), retryMs: 60_000 }, 1_000_000);
  const frames: string[] = [];
  const session = hub.attach('u', { id: 'c', device: 'phone', send: (text) => { frames.push(text.toString()); }, close: () => undefined }, { kind: 'first' });
  await waitUntil('msg 1', async () => frames.some((f) => f.includes('"msg"')), 5000, 5);
  session.ack('c', 1, 'A');
  hub.detach('u', 'c'); // the last logout writes at once, and that write fails
  await waitUntil('the failed write', async () => writes.length === 1, 5000, 5);
  return { hub, writes };
}

test('shutdown writes the acks of a user who left while their write was failing, and names no user left unwritten', async () => {
  // Mutant killed: flushAll without the sessions kept for unwritten acks: their
  // cursors waited for a retry that a stopping process never runs, and were lost.
  const { hub, writes } = await leftWithAckFailing();
  assert.equal(hub.has('u'), false);
  assert.deepEqual(await hub.flushAll(), [], 'no user left with unwritten cursors');
  assert.deepEqual(writes, [{ device: 'phone', seq: 1, ok: false }, { device: 'phone', seq: 1, ok: true }]);
});

test('a reconnect here writes the acks of the session its user left with a write failing, before it reads the cursors', async () => {
  // Mutant killed: flushAcks writing only the user's current session: the cursor the
  // device acked waited for a retry a minute away, and a reconnect without last_seq
  // resumed before it.
  const { hub, writes } = await leftWithAckFailing();
  await hub.flushAcks('u'); // what the gateway does before a new connection of u reads the cursors
  assert.deepEqual(writes, [{ device: 'phone', seq: 1, ok: false }, { device: 'phone', seq: 1, ok: true }]);
  assert.deepEqual(await hub.flushAll(), []);
});
