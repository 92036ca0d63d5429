/**
 * A user session's retry of an epoch rotation whose call failed (src/delivery/session.ts,
 * DESIGN.md §11). When the only sign that Redis lost seqs is a local append landing on a
 * seq already delivered as another message, no read shows it again: before, the failed
 * call was answered like a made one, the pull that followed read a latest at or above
 * what was sent, and the device skipped the seqs assigned again with no `reset`. Now the
 * session tells the machine the call failed, and asks again after the retry back-off of
 * a failed fetch. The inbox is a stand-in whose first rotation throws (Redis down); the
 * machine and the session are the real ones.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AckRounds } from '../../src/delivery/ack-rounds.js';
import { UserSession, type DeliveryConnection } from '../../src/delivery/session.js';
import { spend, TURN_BYTES } from '../../src/delivery/send-turns.js';
import { createLogger } from '../../src/logger.js';
import { CONFIG } from './machine-driver.js';
import { entry, PagedInbox, record, records, settled } from './paged-inbox.js';

const RETRY_MS = 20;

test('a rotation a local append proved, whose call fails, is asked for again after the retry wait, and the device is reset (Node mock timers)', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const p = new PagedInbox({ epoch: 'ep1', firstSeq: 1, latestSeq: 4, entries: [1, 2, 3, 4].map((s) => entry(s)) }, async (self) => {
    if (self.rotations.length === 1) throw new Error('redis down');
    self.page = { ...self.page, epoch: 'ep2' };
    return 'ep2';
  });
  const { rotations } = p;
  const session = new UserSession('u', { inbox: p.inbox, store: records, machine: { ...CONFIG, window: 10 }, logger: createLogger('silent'), retryMs: RETRY_MS }, new AckRounds(100));
  const frames: string[] = [];
  const conn: DeliveryConnection = { id: 'c', device: 'phone', send: (text) => { const f = JSON.parse(text.toString()) as { t: string; seq?: number }; frames.push(f.t === 'msg' ? `msg ${String(f.seq)}` : f.t); }, close: () => undefined };
  try {
    session.login(conn, { kind: 'first' });
    await settled();
    assert.deepEqual(frames.splice(0), ['welcome', 'msg 1', 'msg 2', 'msg 3', 'msg 4']);

    // Redis came back with seqs 1..2; 3 and 4 were appended again (4 on this node): the
    // inbox reads latest 4 again, and only the offer of seq 4 shows the loss.
    p.page = { epoch: 'ep1', firstSeq: 1, latestSeq: 4, entries: [entry(1), entry(2), entry(3, 0x103), entry(4, 0x104)] };
    session.offer(entry(4, 0x104), 'ep1', record(0x104));
    await settled();
    assert.deepEqual(rotations, ['ep1'], 'the rotation was asked for, and failed');
    const readsAfterFailure = p.reads;

    t.mock.timers.tick(RETRY_MS - 1);
    await settled();
    assert.deepEqual(rotations, ['ep1'], 'not asked again before the retry wait');
    assert.equal(p.reads, readsAfterFailure, 'no pull meanwhile: it would read the old epoch');
    t.mock.timers.tick(1);
    await settled();
    assert.deepEqual(rotations, ['ep1', 'ep1'], 'asked again after the retry wait: the sign was kept');
    assert.deepEqual(frames, ['reset', 'msg 1', 'msg 2', 'msg 3', 'msg 4'], 'the device skips the new 3 and 4 with no reset');
  } finally {
    session.logout('c');
  }
});

/** A device's frames as `msg <seq>` or the frame type. */
function recorder(frames: string[]): DeliveryConnection {
  return { id: 'c', device: 'phone', send: (text) => { const f = JSON.parse(text.toString()) as { t: string; seq?: number }; frames.push(f.t === 'msg' ? `msg ${String(f.seq)}` : f.t); }, close: () => undefined };
}

// Whether this turn of the event loop has written its share of frames (send-turns.ts)
// changes when the offered message is delivered, never the epoch guard's checks on it:
// under fan-out load (another message's frames spent the turn) a Redis loss is proven
// and the device reset exactly as on an idle node.
for (const busy of [false, true]) {
  const turn = busy ? 'a turn another fan-out spent' : 'an idle turn';
  test(`an offer landing on a seq delivered as another message proves the loss in ${turn}: rotation, reset`, async () => {
    const p = new PagedInbox({ epoch: 'ep1', firstSeq: 1, latestSeq: 4, entries: [1, 2, 3, 4].map((s) => entry(s)) }, async (self) => {
      self.page = { ...self.page, epoch: 'ep2' };
      return 'ep2';
    });
    const session = new UserSession('u', { inbox: p.inbox, store: records, machine: { ...CONFIG, window: 10 }, logger: createLogger('silent'), retryMs: RETRY_MS }, new AckRounds(100));
    const frames: string[] = [];
    try {
      session.login(recorder(frames), { kind: 'first' });
      await settled();
      assert.deepEqual(frames.splice(0), ['welcome', 'msg 1', 'msg 2', 'msg 3', 'msg 4']);
      // Redis came back with 1..2; 3, 4 and 5 were appended again (4 and 5 on this node).
      p.page = { epoch: 'ep1', firstSeq: 1, latestSeq: 5, entries: [entry(1), entry(2), entry(3, 0x103), entry(4, 0x104), entry(5, 0x105)] };
      if (busy) spend(TURN_BYTES);
      session.offer(entry(4, 0x104), 'ep1', record(0x104));
      session.offer(entry(5, 0x105), 'ep1', record(0x105));
      await settled();
      assert.deepEqual(p.rotations, ['ep1'], 'the reused seq 4 asked for a new epoch');
      assert.deepEqual(frames, ['reset', 'msg 1', 'msg 2', 'msg 3', 'msg 4', 'msg 5'], 'reset, then the inbox as it is now');
    } finally {
      session.logout('c');
    }
  });

  test(`an offer of another epoch reaches a device with a full window in ${turn}: reset`, async () => {
    const p = new PagedInbox({ epoch: 'ep1', firstSeq: 1, latestSeq: 2, entries: [1, 2].map((s) => entry(s)) }, async () => 'ep1');
    const session = new UserSession('u', { inbox: p.inbox, store: records, machine: { ...CONFIG, window: 2 }, logger: createLogger('silent'), retryMs: RETRY_MS }, new AckRounds(100));
    const frames: string[] = [];
    try {
      session.login(recorder(frames), { kind: 'first' });
      await settled();
      assert.deepEqual(frames.splice(0), ['welcome', 'msg 1', 'msg 2'], 'a full window: nothing acked');
      // The inbox was recreated (its keys lost): its third append is on this node.
      p.page = { epoch: 'ep2', firstSeq: 1, latestSeq: 3, entries: [entry(1, 0x201), entry(2, 0x202), entry(3, 0x203)] };
      if (busy) spend(TURN_BYTES);
      session.offer(entry(3, 0x203), 'ep2', record(0x203));
      await settled();
      assert.deepEqual(frames, ['reset', 'msg 1', 'msg 2'], 'reset to the new epoch at once, not at the next heartbeat');
    } finally {
      session.logout('c');
    }
  });
}
