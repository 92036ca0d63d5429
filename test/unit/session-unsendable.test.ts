/**
 * A `msg` that cannot be serialised goes out as a `gap` of its seq (session.ts #run).
 * On a redelivery round that seq is sent again, the resent `msg` marked `redelivered`
 * by the machine, and the `gap` in its place carries the mark too: unmarked, the
 * client got `gap {from: 1, to: 1}` twice, a duplicate docs/protocol.md forbids ("`gap` … `redelivered: true` when they went out
 * on this connection before and were not acked … or as a `gap` already, which a
 * redelivery round sends again").
 */
// test-isolation: own-process (its records reuse MsgIDs such as 0000000000000001 that other unit files send too, and the frame-data cache by MsgID, src/delivery/msg-frame-bytes.ts, is the process's: a cached encoding made its unserialisable record send)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Inbox, InboxPage } from '../../src/inbox/inbox.js';
import type { RecordReader } from '../../src/store/record-reader.js';
import type { StoredMessage } from '../../src/store/record.js';
import { AckRounds } from '../../src/delivery/ack-rounds.js';
import { UserSession, type DeliveryConnection } from '../../src/delivery/session.js';
import { createLogger } from '../../src/logger.js';
import { waitUntil } from '../harness/checks.js';

const id = (n: number): string => n.toString(16).padStart(16, '0');

/**
 * A session of user `u` over an inbox that answers `page()` (read at each fetch) and a
 * store whose record of seq 1 holds a BigInt (JSON.stringify throws on it, as on data
 * nested too deep); connection `c` logged in first. Frames sent are parsed into `frames`.
 */
function sessionOver(page: () => InboxPage, machine: { window: number; ackTimeoutMs: number; backoffMs: number[]; heartbeatMs: number }):
{ session: UserSession; frames: Array<Record<string, unknown>> } {
  const inbox = {
    range: async (_u: string, after: number, limit: number): Promise<InboxPage> =>
      ({ ...page(), entries: page().entries.filter((e) => e.seq > after).slice(0, limit) }),
    ack: async (_u: string, _d: string, seq: number) => seq,
  } as unknown as Inbox;
  const record = (n: number): StoredMessage => ({ id: id(n), kind: 1, type: 't', data: n === 1 ? { big: 1n } : { n }, ts: 1, expiresAt: Number.MAX_SAFE_INTEGER });
  const store: RecordReader = { isOpen: true, get: async () => null, getMany: async (ids: readonly string[]) => ids.map((i) => record(Number.parseInt(i, 16))) };
  const session = new UserSession('u', { inbox, store, machine, logger: createLogger('silent'), retryMs: 20 }, new AckRounds(100));
  const frames: Array<Record<string, unknown>> = [];
  const conn: DeliveryConnection = { id: 'c', device: 'phone', send: (text) => { frames.push(JSON.parse(text.toString())); }, close: () => undefined };
  session.login(conn, { kind: 'first' });
  return { session, frames };
}

test('an unserialisable msg resent by a redelivery round goes out as a gap marked redelivered', async () => {
  const page: InboxPage = { epoch: 'A', firstSeq: 1, latestSeq: 2, entries: [1, 2].map((s) => ({ seq: s, id: id(s), kind: 1 as const })) };
  const { session, frames } = sessionOver(() => page, { window: 10, ackTimeoutMs: 40, backoffMs: [1_000, 1_000, 1_000], heartbeatMs: 25_000 });
  try {
    await waitUntil('the first round and its redelivery', async () => frames.filter((f) => f.t === 'msg').length === 2, 5000, 5);
    const brief = frames.map((f) => `${String(f.t)}${f.t === 'gap' ? ` ${String(f.from)}-${String(f.to)}` : f.t === 'msg' ? ` ${String(f.seq)}` : ''}${f.redelivered === true ? ' r' : ''}`);
    assert.deepEqual(brief, ['welcome', 'gap 1-1', 'msg 2', 'gap 1-1 r', 'msg 2 r']);
    // Its content is there but cannot be sent: not `expired` (docs/protocol.md "Why a gap").
    assert.deepEqual(frames.filter((f) => f.t === 'gap').map((f) => f.reason), ['undeliverable', 'undeliverable']);
  } finally {
    session.logout('c');
  }
});

test('an unserialisable first msg after a null epoch goes out as a gap carrying that epoch; the next msg does not repeat it', async () => {
  let current: InboxPage = { epoch: null, firstSeq: 1, latestSeq: 0, entries: [] };
  const { session, frames } = sessionOver(() => current, { window: 10, ackTimeoutMs: 10_000, backoffMs: [10_000], heartbeatMs: 25_000 });
  try {
    await waitUntil('welcome', async () => frames.length === 1, 5000, 5);
    assert.equal(frames[0]?.epoch, null);
    current = { epoch: 'E1', firstSeq: 1, latestSeq: 2, entries: [1, 2].map((s) => ({ seq: s, id: id(s), kind: 1 as const })) };
    session.notify(2);
    await waitUntil('seqs 1 and 2', async () => frames.length === 3, 5000, 5);
    assert.deepEqual(frames.slice(1).map((f) => [f.t, f.epoch]), [['gap', 'E1'], ['msg', undefined]]);
  } finally {
    session.logout('c');
  }
});
