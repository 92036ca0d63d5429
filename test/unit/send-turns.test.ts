/**
 * Inbox reads answered together, and one message offered to many local recipients,
 * write their frames over several turns of the event loop, at most a turn's budget
 * each (src/delivery/send-turns.ts), and every recipient still gets its exact frame:
 * 200 users' reads of one 60 KB message settle in one microtask run, which wrote all
 * 12 MB in that one turn before. An offer that waits for a later turn is delivered
 * then with no inbox read: a small message offered to 1,000 users costs none.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Inbox, InboxEntry, InboxPage } from '../../src/inbox/inbox.js';
import type { RecordReader } from '../../src/store/record-reader.js';
import type { StoredMessage } from '../../src/store/record.js';
import { AckRounds } from '../../src/delivery/ack-rounds.js';
import { UserSession, type DeliveryConnection } from '../../src/delivery/session.js';
import { spend, turnSpent, TURN_BYTES, TURN_FRAMES } from '../../src/delivery/send-turns.js';
import { sendFrame } from '../../src/delivery/send-frame.js';
import { createLogger } from '../../src/logger.js';

test('fetches answered in one turn write their frames over several turns, each within the budget', async () => {
  const big = 'x'.repeat(60_000);
  const record: StoredMessage = Object.freeze({ id: '0000000000000001', kind: 1, type: 't', data: Object.freeze({ big }), ts: 1, expiresAt: Number.MAX_SAFE_INTEGER });
  let open!: () => void;
  const gate = new Promise<void>((resolve) => { open = resolve; });
  const store: RecordReader = { isOpen: true, get: async () => record, getMany: async (ids: readonly string[]) => ids.map(() => record) };
  const users = 200;
  const msgs: number[] = [];
  const sessions: UserSession[] = [];
  for (let u = 0; u < users; u++) {
    const seq = u + 1;
    const page: InboxPage = { epoch: 'E', firstSeq: seq, latestSeq: seq, entries: [{ seq, id: record.id, kind: 1 as const }] };
    // Every login's read waits for the gate: they all settle together.
    const inbox = {
      range: async (_u: string, after: number) => { await gate; return { ...page, entries: page.entries.filter((e) => e.seq > after) }; },
      ack: async (_u: string, _d: string, s: number) => s,
    } as unknown as Inbox;
    const machine = { window: 10, ackTimeoutMs: 60_000, backoffMs: [60_000], heartbeatMs: 60_000 };
    const session = new UserSession(`u${u}`, { inbox, store, machine, logger: createLogger('silent'), retryMs: 60_000 }, new AckRounds(100));
    const conn: DeliveryConnection = {
      id: `c${u}`, device: 'd', close: () => undefined,
      send: (text, t) => {
        if (t !== 'msg') return;
        const f = JSON.parse(text.toString()) as { seq: number; data: { big: string } };
        assert.equal(f.seq, seq);
        assert.equal(f.data.big, big);
        msgs.push(f.seq);
      },
    };
    sessions.push(session);
    session.login(conn, { kind: 'first' });
  }
  try {
    open();
    // Count what each turn wrote: a turn is what runs between two setImmediate callbacks.
    const perTurn: number[] = [];
    let seen = 0;
    while (msgs.length < users && perTurn.length < 10_000) {
      await new Promise((resolve) => setImmediate(resolve));
      perTurn.push(msgs.length - seen);
      seen = msgs.length;
    }
    assert.equal(msgs.length, users);
    const perTurnLimit = Math.ceil(TURN_BYTES / 60_000) + 1;
    assert.ok(perTurn.every((n) => n <= perTurnLimit), `frames per turn ${perTurn.filter((n) => n > 0).join(',')} (limit ${perTurnLimit})`);
    assert.ok(perTurn.filter((n) => n > 0).length > 1, 'written over several turns');
    assert.deepEqual([...msgs].sort((a, b) => a - b), Array.from({ length: users }, (_, i) => i + 1));
  } finally {
    sessions.forEach((s, u) => s.logout(`c${u}`));
  }
});

/** Counts what each turn wrote until `done` (a turn: what runs between two setImmediate callbacks). */
async function perTurn(count: () => number, done: () => boolean): Promise<number[]> {
  const turns: number[] = [];
  let seen = count();
  while (!done() && turns.length < 10_000) {
    await new Promise((resolve) => setImmediate(resolve));
    turns.push(count() - seen);
    seen = count();
  }
  return turns;
}

/**
 * `users` sessions, each caught up with an empty inbox, then one `record` appended at
 * seq 1 of each and offered to all in one turn (ingest's pipeline answer calls every
 * local recipient's offer in one callback). The inbox reads the offers caused and the
 * frames written per turn.
 */
async function offerToAll(record: StoredMessage, users: number, check: (user: number, f: Record<string, unknown>) => void): Promise<{ reads: number; turns: number[]; msgs: number }> {
  const entry: InboxEntry = { seq: 1, id: record.id, kind: 1 };
  let page: InboxPage = { epoch: 'E', firstSeq: 0, latestSeq: 0, entries: [] };
  let reads = 0;
  const inbox = { range: async (_u: string, after: number) => { reads++; return { ...page, entries: page.entries.filter((e) => e.seq > after) }; } } as unknown as Inbox;
  const store: RecordReader = { isOpen: true, get: async () => record, getMany: async (ids: readonly string[]) => ids.map(() => record) };
  const machine = { window: 10, ackTimeoutMs: 60_000, backoffMs: [60_000], heartbeatMs: 60_000 };
  let msgs = 0;
  const sessions: UserSession[] = [];
  for (let u = 0; u < users; u++) {
    const session = new UserSession(`u${u}`, { inbox, store, machine, logger: createLogger('silent'), retryMs: 60_000 }, new AckRounds(100));
    const conn: DeliveryConnection = {
      id: `c${u}`, device: 'd', close: () => undefined,
      send: (text, t) => { if (t === 'msg') { msgs++; check(u, JSON.parse(text.toString()) as Record<string, unknown>); } },
    };
    session.login(conn, { kind: 'first' });
    sessions.push(session);
  }
  try {
    // Every login read its (empty) inbox and was welcomed.
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
    const readsBefore = reads;
    page = { epoch: 'E', firstSeq: 1, latestSeq: 1, entries: [entry] };
    for (const s of sessions) s.offer(entry, 'E', record);
    // The offers' own turn wrote the first frames (delivered as offered, until the share is spent).
    const turns = [msgs, ...await perTurn(() => msgs, () => msgs >= users)];
    // Nothing more comes.
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    return { reads: reads - readsBefore, turns, msgs };
  } finally {
    sessions.forEach((s, u) => s.logout(`c${u}`));
  }
}

// MsgIDs differ between tests: a message's data never changes for its MsgID (the
// encoded-data cache's key, msg-frame-bytes.ts).
test('a small message offered to 1,000 online users in one turn: every one delivered, no inbox read', async () => {
  const record: StoredMessage = Object.freeze({ id: '0000000000000003', kind: 1, type: 'chat', data: Object.freeze({ text: 'hi' }), ts: 1, expiresAt: Number.MAX_SAFE_INTEGER });
  const { reads, msgs, turns } = await offerToAll(record, 1_000, (_u, f) => assert.deepEqual(f, { t: 'msg', seq: 1, id: record.id, type: 'chat', ts: 1, data: { text: 'hi' } }));
  assert.equal(msgs, 1_000);
  assert.equal(reads, 0, 'offers that waited for a later turn were delivered as offered, not read');
  assert.ok(turns.every((n) => n <= TURN_FRAMES), `frames per turn ${turns.join(',')}`);
});

test('a 60 KB message offered to 1,000 online users in one turn is written over many turns, each within the budget, with no inbox read', async () => {
  const big = 'x'.repeat(60_000);
  const record: StoredMessage = Object.freeze({ id: '0000000000000002', kind: 1, type: 't', data: Object.freeze({ big }), ts: 1, expiresAt: Number.MAX_SAFE_INTEGER });
  const { reads, msgs, turns } = await offerToAll(record, 1_000, (_u, f) => {
    assert.equal(f.seq, 1);
    assert.equal((f.data as { big: string }).big, big);
  });
  assert.equal(msgs, 1_000);
  assert.equal(reads, 0);
  const perTurnLimit = Math.ceil(TURN_BYTES / 60_000) + 1;
  const busy = turns.filter((n) => n > 0);
  assert.ok(busy.length >= Math.floor(1_000 / perTurnLimit), `written over ${busy.length} turns`);
  assert.ok(turns.every((n) => n <= perTurnLimit), `frames per turn ${busy.join(',')} (limit ${perTurnLimit})`);
  assert.ok((turns[0] ?? 0) > 0, 'the offers\' own turn delivered its share at once');
});

/** A connection that records its frames as `msg <seq>`, `gap <from>-<to>` or the type. */
function recording(id: string, frames: string[]): DeliveryConnection {
  return {
    id, device: id, close: () => undefined,
    send: (text) => {
      const f = JSON.parse(text.toString()) as { t: string; seq?: number; from?: number; to?: number };
      frames.push(f.t === 'msg' ? `msg ${String(f.seq)}` : f.t === 'gap' ? `gap ${String(f.from)}-${String(f.to)}` : f.t);
    },
  };
}

const rec = (n: number): StoredMessage => ({ id: n.toString(16).padStart(16, '0'), kind: 1, type: 't', data: { n }, ts: 1, expiresAt: Number.MAX_SAFE_INTEGER });
const ent = (seq: number): InboxEntry => ({ seq, id: rec(seq).id, kind: 1 });
const byId: RecordReader = { isOpen: true, get: async () => null, getMany: async (ids: readonly string[]) => ids.map((i) => rec(Number.parseInt(i, 16))) };
const CFG = { window: 1_000, ackTimeoutMs: 60_000, backoffMs: [60_000], heartbeatMs: 60_000 };

/** An inbox of epoch E holding seqs 1..latest() (MsgID = seq); `later`: its answers come a turn later. */
function seqInbox(latest: () => number, later: boolean): Inbox {
  return { range: async (_u: string, after: number, limit: number): Promise<InboxPage> => {
    if (later) await new Promise((resolve) => setImmediate(resolve));
    const entries: InboxEntry[] = [];
    for (let s = after + 1; s <= latest() && entries.length < limit; s++) entries.push(ent(s));
    return { epoch: 'E', firstSeq: 1, latestSeq: latest(), entries };
  } } as unknown as Inbox;
}

test('a device that logs in while an offer waits for its turn joins on a read of its own: no gap, nothing skipped', async () => {
  let latest = 2;
  const inbox = seqInbox(() => latest, false);
  const s = new UserSession('u', { inbox, store: byId, machine: CFG, logger: createLogger('silent'), retryMs: 60_000 }, new AckRounds(100));
  const phone: string[] = [];
  const tablet: string[] = [];
  try {
    s.login(recording('phone', phone), { kind: 'first' });
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(phone.splice(0), ['welcome', 'msg 1', 'msg 2']);
    latest = 3;
    spend(TURN_BYTES); // another fan-out's frames used this turn's share
    s.offer(ent(3), 'E', rec(3));
    // The tablet last saw seq 1: it logs in before the offer's turn comes.
    s.login(recording('tablet', tablet), { kind: 'after', seq: 1 });
    for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(phone, ['msg 3']);
    assert.deepEqual(tablet, ['welcome', 'msg 2', 'msg 3']);
  } finally {
    s.logout('phone');
    s.logout('tablet');
  }
});

test('offers waiting for their turn, deferred fetch answers and offers turned notifies keep one user\'s seqs complete and in order', async () => {
  let latest = 3;
  const inbox = seqInbox(() => latest, true);
  const s = new UserSession('u', { inbox, store: byId, machine: CFG, logger: createLogger('silent'), retryMs: 60_000 }, new AckRounds(100));
  const frames: string[] = [];
  // Other users' load: every turn's share spent in its timers phase, before I/O answers.
  const load = setInterval(() => spend(TURN_BYTES), 0);
  try {
    s.login(recording('c', frames), { kind: 'first' });
    for (let i = 0; i < 200; i++) {
      latest++;
      // Some offers in a turn with room, some in a spent one; one or two per turn.
      if (i % 3 === 0) spend(TURN_BYTES);
      s.offer(ent(latest), 'E', rec(latest));
      if (i % 2 === 0) await new Promise((resolve) => setImmediate(resolve));
      if (i % 7 === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    }
    const msgs = (): number => frames.filter((f) => f.startsWith('msg')).length;
    await perTurn(msgs, () => msgs() >= latest);
    assert.deepEqual(frames, ['welcome', ...Array.from({ length: latest }, (_, i) => `msg ${i + 1}`)]);
  } finally {
    clearInterval(load);
    s.logout('c');
  }
});

test('a frame written as text counts its UTF-8 bytes in the turn\'s budget, not its UTF-16 units', async () => {
  // A fresh turn: the budget is whole.
  await new Promise((resolve) => setImmediate(resolve));
  const sent: number[] = [];
  const conn: DeliveryConnection = { id: 'c', device: 'd', close: () => undefined, send: (text) => { sent.push(Buffer.byteLength(text)); } };
  // 350,000 '€': 350,000 UTF-16 units (a third of the budget), 1,050,000 bytes (past it).
  sendFrame(conn, { t: 'error', code: 'INVALID_REQUEST', message: '€'.repeat(350_000) }, createLogger('silent'), 'u');
  assert.ok((sent[0] ?? 0) > TURN_BYTES);
  assert.equal(turnSpent(), true, 'the turn has written more than its share');
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(turnSpent(), false, 'the next turn starts whole');
});
