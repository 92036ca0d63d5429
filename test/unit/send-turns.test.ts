/**
 * Inbox reads answered together write their frames over several turns of the event
 * loop, at most a turn's budget each (src/delivery/send-turns.ts), and every recipient
 * still gets its exact frame: 200 users' reads of one 60 KB message settle in one
 * microtask run, which wrote all 12 MB in that one turn before.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Inbox, InboxPage } from '../../src/inbox/inbox.js';
import type { RecordReader } from '../../src/store/record-reader.js';
import type { StoredMessage } from '../../src/store/record.js';
import { AckRounds } from '../../src/delivery/ack-rounds.js';
import { UserSession, type DeliveryConnection } from '../../src/delivery/session.js';
import { TURN_BYTES } from '../../src/delivery/send-turns.js';
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
