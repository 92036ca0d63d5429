/**
 * A user session's redelivery timers (src/delivery/session.ts, DESIGN.md §5
 * "Redelivery"): a connection with messages in flight has its timer armed, and the
 * timer goes with the connection when it closes, so a closed connection neither keeps
 * a stopping process alive until its ack timeout nor fires a round for nobody. The
 * inbox here is a stand-in that answers reads at once; the machine and the session are
 * the real ones.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Inbox, InboxPage } from '../../src/inbox/inbox.js';
import type { RecordReader } from '../../src/store/record-reader.js';
import type { StoredMessage } from '../../src/store/record.js';
import { AckRounds } from '../../src/delivery/ack-rounds.js';
import { UserSession, type DeliveryConnection } from '../../src/delivery/session.js';
import { createLogger } from '../../src/logger.js';
import { CONFIG } from './machine-driver.js';

const id = (n: number): string => n.toString(16).padStart(16, '0');
const record = (n: number): StoredMessage => ({ id: id(n), kind: 1, type: 't', data: { n }, ts: 1, expiresAt: Number.MAX_SAFE_INTEGER });

/** Timers keeping the process alive now. */
const liveTimers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

test('a connection closed with messages in flight takes its redelivery timer with it', async () => {
  const page: InboxPage = { epoch: 'A', firstSeq: 1, latestSeq: 2, entries: [1, 2].map((s) => ({ seq: s, id: id(s), kind: 1 as const })) };
  const inbox = {
    range: async (_u: string, after: number, limit: number): Promise<InboxPage> =>
      ({ ...page, entries: page.entries.filter((e) => e.seq > after).slice(0, limit) }),
  } as unknown as Inbox;
  const store: RecordReader = { isOpen: true, get: async () => null, getMany: async (ids: readonly string[]) => ids.map((i) => record(Number.parseInt(i, 16))) };
  const session = new UserSession('u', { inbox, store, machine: CONFIG, logger: createLogger('silent'), retryMs: 20 }, new AckRounds(100));
  const frames: Array<Record<string, unknown>> = [];
  const conn: DeliveryConnection = { id: 'c', device: 'phone', send: (text) => { frames.push(JSON.parse(text.toString())); }, close: () => undefined };
  session.login(conn, { kind: 'first' });
  for (let i = 0; i < 100 && frames.filter((f) => f.t === 'msg').length < 2; i++) await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(frames.filter((f) => f.t === 'msg').map((f) => f.seq), [1, 2], 'two messages in flight, unacked');
  // Counted right around the logout (synchronous: no other timer can run out in
  // between). The session holds one timer: the connection's redelivery timer.
  const before = liveTimers();
  assert.equal(session.logout('c'), true);
  assert.equal(liveTimers(), before - 1, 'the redelivery timer is cleared with the connection');
});
