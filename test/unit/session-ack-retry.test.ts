/**
 * A user session's ack write that fails (src/delivery/session.ts) keeps its cursors for
 * the next round (docs/protocol.md: acks whose write failed are kept and written
 * first), but only where nothing newer is held: the failed batch is older than any ack
 * made while it was in flight. When the inbox's epoch changed meanwhile (a reset) and
 * the client acked under the new epoch, putting the old-epoch cursor back over the new
 * one lost the new ack (ack-7.lua stores no cursor of the current epoch for the old epoch's). The inbox here is a
 * stand-in whose ack writes the test settles by hand; the machine and the session are
 * the real ones.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Inbox, InboxPage } from '../../src/inbox/inbox.js';
import type { RecordReader } from '../../src/store/record-reader.js';
import type { StoredMessage } from '../../src/store/record.js';
import { AckRounds } from '../../src/delivery/ack-rounds.js';
import { ACK_WRITE_FAILED_LOG } from '../../src/delivery/ack-cursors.js';
import { UserSession, type DeliveryConnection } from '../../src/delivery/session.js';
import { createLogger } from '../../src/logger.js';
import { waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { CONFIG } from '../unit/machine-driver.js';

const id = (n: number): string => n.toString(16).padStart(16, '0');
const record = (n: number): StoredMessage => ({ id: id(n), kind: 1, type: 't', data: { n }, ts: 1, expiresAt: Number.MAX_SAFE_INTEGER });

test('an ack write that fails does not put its old-epoch cursor back over an ack made under the new epoch meanwhile', async () => {
  let page: InboxPage = { epoch: 'A', firstSeq: 1, latestSeq: 3, entries: [1, 2, 3].map((s) => ({ seq: s, id: id(s), kind: 1 as const })) };
  const writes: Array<{ device: string; seq: number; epoch: string | undefined; settle: (err?: Error) => void }> = [];
  const inbox = {
    range: async (_u: string, after: number, limit: number): Promise<InboxPage> =>
      ({ ...page, entries: page.entries.filter((e) => e.seq > after).slice(0, limit) }),
    lineage: async (): Promise<undefined> => undefined,
    ack: (_u: string, device: string, seq: number, epoch?: string) => new Promise<number>((resolve, reject) => {
      writes.push({ device, seq, epoch, settle: (err) => (err ? reject(err) : resolve(seq)) });
    }),
  } as unknown as Inbox;
  const store: RecordReader = { isOpen: true, get: async () => null, getMany: async (ids: readonly string[]) => ids.map((i) => record(Number.parseInt(i, 16))) };
  const { logger, lines } = capturingLogger();
  const session = new UserSession('u', { inbox, store, machine: { ...CONFIG, window: 10 }, logger, retryMs: 20 }, new AckRounds(1_000_000));
  const frames: Array<Record<string, unknown>> = [];
  const conn: DeliveryConnection = { id: 'c', device: 'phone', send: (text) => { frames.push(JSON.parse(text.toString())); }, close: () => undefined };

  session.login(conn, { kind: 'first' });
  await waitUntil('msgs 1..3 of epoch A', async () => frames.filter((f) => f.t === 'msg').length === 3, 5000, 5);
  session.ack('c', 3, 'A');
  void session.flushAcks();
  await waitUntil('the write of (A, 3) in flight', async () => writes.length === 1, 5000, 5);

  // While it is in flight the inbox is recreated: epoch B, one message; the client acks it.
  page = { epoch: 'B', firstSeq: 1, latestSeq: 1, entries: [{ seq: 1, id: id(9), kind: 1 }] };
  session.heartbeat();
  await waitUntil('reset, then msg 1 of epoch B', async () => frames.some((f) => f.t === 'msg' && f.id === id(9)), 5000, 5);
  session.ack('c', 1, 'B');

  // The write of (A, 3) fails (Redis timed out); the session keeps what it holds for the next round.
  writes[0]?.settle(new Error('Command timed out'));
  // Its warning is logged once the failed cursors are put back for the retry.
  await waitUntil('the failed write settled', async () => lines.some((l) => l.msg === ACK_WRITE_FAILED_LOG) && writes.length === 1, 5000, 5);
  void session.flushAcks();
  await waitUntil('the next write', async () => writes.length >= 2, 5000, 5);
  const next = writes.slice(1).map((w) => ({ device: w.device, seq: w.seq, epoch: w.epoch }));
  for (const w of writes.slice(1)) w.settle();
  assert.deepEqual(next, [{ device: 'phone', seq: 1, epoch: 'B' }], 'the ack made under the new epoch is written, not the failed old-epoch one');
  session.logout('c');
});

test('an ack made while a failed write waits for its retry goes with that retry, not with the next round (Node mock timers)', async (t) => {
  // Redis down: the session's writes are paced by the back-off (`retryMs`), not by the
  // 100 ms rounds, however often the client acks meanwhile.
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const ROUND_MS = 10;
  const RETRY_MS = 200;
  const page: InboxPage = { epoch: 'A', firstSeq: 1, latestSeq: 3, entries: [1, 2, 3].map((s) => ({ seq: s, id: id(s), kind: 1 as const })) };
  const writes: Array<{ seq: number; settle: (err?: Error) => void }> = [];
  const inbox = {
    range: async (_u: string, after: number, limit: number): Promise<InboxPage> =>
      ({ ...page, entries: page.entries.filter((e) => e.seq > after).slice(0, limit) }),
    ack: (_u: string, _device: string, seq: number) => new Promise<number>((resolve, reject) => {
      writes.push({ seq, settle: (err) => (err ? reject(err) : resolve(seq)) });
    }),
  } as unknown as Inbox;
  const store: RecordReader = { isOpen: true, get: async () => null, getMany: async (ids: readonly string[]) => ids.map((i) => record(Number.parseInt(i, 16))) };
  const session = new UserSession('u', { inbox, store, machine: { ...CONFIG, window: 10 }, logger: createLogger('silent'), retryMs: RETRY_MS }, new AckRounds(ROUND_MS));
  const frames: Array<Record<string, unknown>> = [];
  const conn: DeliveryConnection = { id: 'c', device: 'phone', send: (text) => { frames.push(JSON.parse(text.toString())); }, close: () => undefined };
  /** Runs what is ready (promise callbacks, the session's effects) without moving the mocked clock. */
  const settled = async (): Promise<void> => {
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  };

  session.login(conn, { kind: 'first' });
  for (let i = 0; i < 100 && frames.filter((f) => f.t === 'msg').length < 3; i++) await settled();
  assert.equal(frames.filter((f) => f.t === 'msg').length, 3, 'msgs 1..3');
  session.ack('c', 1, 'A');
  t.mock.timers.tick(ROUND_MS);
  await settled();
  assert.deepEqual(writes.map((w) => w.seq), [1], 'the round wrote ack 1');
  writes[0]?.settle(new Error('Command timed out'));
  await settled();

  session.ack('c', 2, 'A');
  t.mock.timers.tick(RETRY_MS - 1);
  await settled();
  assert.deepEqual(writes.map((w) => w.seq), [1], 'nothing written before the back-off is over');
  t.mock.timers.tick(1); // the retry: the session joins the next round
  t.mock.timers.tick(ROUND_MS);
  await settled();
  assert.deepEqual(writes.map((w) => w.seq), [1, 2], 'the retry writes the newest cursor');
  writes[1]?.settle();
  await settled();
  assert.equal(session.holdsAcks, false);
  session.logout('c');
});
