/**
 * Edges of a user session (src/delivery/session.ts) that a mutation pass over
 * src/delivery found untested: the retry back-off starts over after a read that
 * worked, a retry armed earlier goes when a new one is armed, and a `msg` sent as a
 * `gap` (it could not be serialised) leaves the window. The inbox and the store are
 * stand-ins answered by hand; the machine and the session are the real ones.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Inbox, InboxPage } from '../../src/inbox/inbox.js';
import type { RecordReader } from '../../src/store/record-reader.js';
import type { StoredMessage } from '../../src/store/record.js';
import { AckRounds } from '../../src/delivery/ack-rounds.js';
import { UserSession, type DeliveryConnection } from '../../src/delivery/session.js';
import { createLogger } from '../../src/logger.js';
import { waitUntil } from '../harness/checks.js';
import { CONFIG } from './machine-driver.js';

const id = (n: number): string => n.toString(16).padStart(16, '0');
const EMPTY: InboxPage = { epoch: 'A', firstSeq: 1, latestSeq: 0, entries: [] };

interface Read { resolve: (page: InboxPage) => void; reject: (err: Error) => void }

/** A session whose inbox reads each wait for the test to answer or fail them. */
function sessionWithHandReads(retryMs: number): { session: UserSession; reads: Read[] } {
  const reads: Read[] = [];
  const inbox = {
    range: () => new Promise<InboxPage>((resolve, reject) => { reads.push({ resolve, reject }); }),
  } as unknown as Inbox;
  const store: RecordReader = { isOpen: true, get: async () => null, getMany: async () => [] };
  const session = new UserSession('u', { inbox, store, machine: CONFIG, logger: createLogger('silent'), retryMs }, new AckRounds(100));
  return { session, reads };
}

const conn = (cid: string): DeliveryConnection => ({ id: cid, device: cid, send: () => undefined, close: () => undefined });
const settled = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
/** Timers keeping the process alive now. */
const liveTimers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

test('a read that works ends the failing streak: the next failure is retried after retryMs again, not a doubled wait (Node mock timers)', async (t) => {
  // Mutant killed: the count of failures in a row not reset by a read that worked: the
  // wait went on doubling across streaks (and the next streak's first warning was lost).
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const RETRY_MS = 20;
  const { session, reads } = sessionWithHandReads(RETRY_MS);
  session.login(conn('a'), { kind: 'first' });
  /** Fails read `n` (1-based) and returns how long, in retryMs, until the retry reads. */
  const failAndTime = async (n: number): Promise<number> => {
    reads[n - 1]?.reject(new Error('redis down'));
    await settled();
    let waited = 0;
    while (reads.length === n) {
      assert.ok(waited < 10 * RETRY_MS, 'the retry never came');
      t.mock.timers.tick(1);
      waited += 1;
      await settled();
    }
    return waited / RETRY_MS;
  };
  assert.equal(await failAndTime(1), 1);
  assert.equal(await failAndTime(2), 2);
  reads[2]?.resolve(EMPTY); // the third read works: welcome
  await settled();
  session.heartbeat();
  assert.equal(reads.length, 4);
  assert.equal(await failAndTime(4), 1, 'a new streak starts at retryMs');
  session.logout('a');
});

test('a failed read while a retry is armed replaces it: the last connection closing leaves no retry timer behind', async () => {
  // Mutant killed: no clearTimeout of the retry armed before: a notify's read failing
  // during the wait armed a second retry, and the first outlived the last logout,
  // holding a stopping process.
  const { session, reads } = sessionWithHandReads(10_000);
  const base = liveTimers();
  session.login(conn('a'), { kind: 'first' });
  reads[0]?.reject(new Error('redis down'));
  for (let i = 0; i < 5; i++) await settled();
  assert.equal(liveTimers(), base + 1, 'the retry is armed');
  session.notify(); // pulls at once, before the retry
  assert.equal(reads.length, 2);
  reads[1]?.reject(new Error('redis down'));
  for (let i = 0; i < 5; i++) await settled();
  assert.equal(liveTimers(), base + 1, 'one retry armed, not two');
  session.logout('a');
  assert.equal(liveTimers(), base, 'no timer left');
});

test('a msg that cannot be serialised goes out as a gap and leaves the window: nothing awaits an ack for it', async () => {
  // Mutant killed: `undeliverable` not called for a msg sent as a gap: its seq stayed
  // in the window, its redelivery timer ran, and a client that (rightly) does not ack a
  // gap was sent it again and again, then closed 4008.
  // A MsgID of its own: a message's data is the same wherever its id is sent (the
  // encoded-data cache keeps a BigInt's failure by MsgID: msg-frame-bytes.ts).
  const page: InboxPage = { epoch: 'A', firstSeq: 1, latestSeq: 1, entries: [{ seq: 1, id: id(0xbad), kind: 1 }] };
  const inbox = {
    range: async (_u: string, after: number): Promise<InboxPage> => ({ ...page, entries: page.entries.filter((e) => e.seq > after) }),
  } as unknown as Inbox;
  // Its data holds a BigInt: JSON.stringify throws on it, as on data nested too deep.
  const record: StoredMessage = { id: id(0xbad), kind: 1, type: 't', data: { big: 1n }, ts: 1, expiresAt: Number.MAX_SAFE_INTEGER };
  const store: RecordReader = { isOpen: true, get: async () => null, getMany: async (ids: readonly string[]) => ids.map(() => record) };
  const session = new UserSession('u', { inbox, store, machine: CONFIG, logger: createLogger('silent'), retryMs: 20 }, new AckRounds(100));
  const frames: Array<Record<string, unknown>> = [];
  session.login({ id: 'c', device: 'phone', send: (text) => { frames.push(JSON.parse(text.toString())); }, close: () => undefined }, { kind: 'first' });
  try {
    await waitUntil('the gap in place of msg 1', async () => frames.some((f) => f.t === 'gap'), 5000, 5);
    assert.deepEqual(frames.map((f) => f.t), ['welcome', 'gap']);
    assert.deepEqual(session.machine.cursor('c'), { acked: 0, sent: 1, inflight: 0, paused: false });
  } finally {
    session.logout('c');
  }
});

test('an ack write that fails for one device while another device\'s succeeds is retried for the one that failed', async () => {
  // Mutant killed: a round retried only when every write of it failed (`some` →
  // `every`): the failed device's cursor was dropped, and a plain reconnect of that
  // device resumed before what it had acked.
  const page: InboxPage = { epoch: 'A', firstSeq: 1, latestSeq: 3, entries: [1, 2, 3].map((s) => ({ seq: s, id: id(s), kind: 1 as const })) };
  const writes: Array<{ device: string; seq: number; settle: (err?: Error) => void }> = [];
  const inbox = {
    range: async (_u: string, after: number): Promise<InboxPage> => ({ ...page, entries: page.entries.filter((e) => e.seq > after) }),
    ack: (_u: string, device: string, seq: number) => new Promise<number>((resolve, reject) => {
      writes.push({ device, seq, settle: (err) => (err ? reject(err) : resolve(seq)) });
    }),
  } as unknown as Inbox;
  const record = (n: number): StoredMessage => ({ id: id(n), kind: 1, type: 't', data: { n }, ts: 1, expiresAt: Number.MAX_SAFE_INTEGER });
  const store: RecordReader = { isOpen: true, get: async () => null, getMany: async (ids: readonly string[]) => ids.map((i) => record(Number.parseInt(i, 16))) };
  const session = new UserSession('u', { inbox, store, machine: { ...CONFIG, window: 10 }, logger: createLogger('silent'), retryMs: 20 }, new AckRounds(10));
  const msgs = new Map<string, number>();
  const connOf = (cid: string, device: string): DeliveryConnection => ({
    id: cid, device, send: (text) => { if (text.includes('"msg"')) msgs.set(cid, (msgs.get(cid) ?? 0) + 1); }, close: () => undefined,
  });
  session.login(connOf('c1', 'phone'), { kind: 'first' });
  session.login(connOf('c2', 'laptop'), { kind: 'first' });
  try {
    await waitUntil('msgs 1..3 on both', async () => msgs.get('c1') === 3 && msgs.get('c2') === 3, 5000, 5);
    session.ack('c1', 3, 'A');
    session.ack('c2', 2, 'A');
    void session.flushAcks();
    await waitUntil('both writes in flight', async () => writes.length === 2, 5000, 5);
    for (const w of writes) w.settle(w.device === 'phone' ? new Error('Command timed out') : undefined);
    // The whole round is written again (a cursor only grows: the laptop's again is harmless).
    await waitUntil('the retry of the phone\'s cursor', async () => writes.length > 2, 5000, 5);
    const retried = writes.slice(2);
    for (const w of retried) w.settle();
    assert.ok(retried.some((w) => w.device === 'phone' && w.seq === 3), JSON.stringify(retried.map((w) => [w.device, w.seq])));
  } finally {
    session.logout('c1');
    session.logout('c2');
  }
});
