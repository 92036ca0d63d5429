/**
 * A session whose user's last connection here closes while a read of the inbox is in
 * flight is kept until that read is judged (src/delivery/hub.ts `#owing`; docs/decisions.md
 * "Redis with less than it had"): the read may show that Redis gave the inbox back with
 * less than the node delivered, and the rotation it proves is made with nobody here.
 * Before, the session was dropped, the page judged against no connection, and a device
 * back at once with its `last_seq` was judged only by a later read, which appends had
 * passed again: welcomed after it, the seqs assigned again skipped with no `reset` (a
 * model review's finding S3). The inbox is a stand-in whose reads are held until the
 * test lets them answer (as read when asked); the hub, sessions and machines are real.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { Hub } from '../../src/delivery/hub.js';
import type { DeliveryConnection } from '../../src/delivery/session.js';
import type { InboxPage } from '../../src/inbox/inbox.js';
import { createLogger } from '../../src/logger.js';
import { CONFIG } from './machine-driver.js';
import { entry, PagedInbox, record, records, settled } from './paged-inbox.js';

interface Held {
  hub: Hub;
  p: PagedInbox;
  /** Lets the reads held so far answer. */
  release(): void;
  /** Frame types and seqs each connection was sent: `welcome 1`, `msg 3`, `reset ep2 5`. */
  frames: Map<string, string[]>;
  connect(id: string, resume: Parameters<Hub['attach']>[2]): void;
}

const USER = 'u';

/** A user sent seqs 1..4 of ep1 over connection `c`; reads are then held until released. Timers are mocked (redelivery). */
async function deliveredFour(t: TestContext): Promise<Held> {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const p = new PagedInbox({ epoch: 'ep1', firstSeq: 1, latestSeq: 4, entries: [1, 2, 3, 4].map((s) => entry(s)), newest: entry(4) }, async (self) => {
    self.page = { ...self.page, epoch: 'ep2' };
    return 'ep2';
  });
  let hold = false;
  const waiting: (() => void)[] = [];
  const range = p.inbox.range.bind(p.inbox);
  // Read as asked, answered when released (a read whose content is still being read).
  p.inbox.range = async (...args: Parameters<typeof range>): Promise<InboxPage> => {
    const page = await range(...args);
    if (hold) await new Promise<void>((resolve) => waiting.push(resolve));
    return page;
  };
  const hub = new Hub({ inbox: p.inbox, store: records, machine: { ...CONFIG, window: 10 }, logger: createLogger('silent'), retryMs: 20 }, 100);
  const frames = new Map<string, string[]>();
  const connect = (id: string, resume: Parameters<Hub['attach']>[2]): void => {
    const seen: string[] = [];
    frames.set(id, seen);
    const conn: DeliveryConnection = {
      id, device: 'phone', close: () => hub.detach(USER, id),
      send: (text) => {
        const f = JSON.parse(text.toString()) as { t: string; seq?: number; resume_from?: number; epoch?: string };
        seen.push(f.t === 'welcome' ? `welcome ${String(f.resume_from)}` : f.t === 'reset' ? `reset ${String(f.epoch)} ${String(f.seq)}` : `${f.t} ${String(f.seq)}`);
      },
    };
    hub.attach(USER, conn, resume);
  };
  connect('c', { kind: 'first' });
  await settled();
  assert.deepEqual(frames.get('c'), ['welcome 1', 'msg 1', 'msg 2', 'msg 3', 'msg 4']);
  hold = true;
  return { hub, p, frames, connect, release: () => { for (const go of waiting.splice(0)) go(); } };
}

test('the last connection closes while the read that shows the loss is in flight: the session is kept until it is judged, and the rotation is made with nobody here (Node mock timers)', async (t) => {
  const h = await deliveredFour(t);
  h.p.page = { epoch: 'ep1', firstSeq: 1, latestSeq: 2, entries: [entry(1), entry(2)], newest: entry(2) }; // Redis went back to 2
  h.hub.session(USER)?.heartbeat();
  await settled();
  h.hub.detach(USER, 'c');
  assert.equal(h.hub.has(USER), false);
  assert.equal(h.hub.owingRotations, 1, 'kept while its read is in flight (before: dropped)');
  h.release();
  await settled();
  assert.deepEqual(h.p.rotations, ['ep1'], 'the read proved the loss (latest 2, 4 delivered): a new epoch');
  assert.equal(h.hub.owingRotations, 0, 'dropped once the rotation is made');
  const reads = h.p.reads;
  await settled();
  assert.equal(h.p.reads, reads, 'nothing read for nobody');
});

test('a read in flight that shows nothing: the session is dropped once it is judged (Node mock timers)', async (t) => {
  const h = await deliveredFour(t);
  h.hub.session(USER)?.heartbeat();
  await settled();
  h.hub.detach(USER, 'c');
  assert.equal(h.hub.owingRotations, 1);
  h.release();
  await settled();
  assert.deepEqual(h.p.rotations, []);
  assert.equal(h.hub.owingRotations, 0);
});

test('a device back at once with its last_seq while that read is in flight, appends having passed it again by its own read: reset under the new epoch, not welcomed after 4 (Node mock timers)', async (t) => {
  const h = await deliveredFour(t);
  h.p.page = { epoch: 'ep1', firstSeq: 1, latestSeq: 2, entries: [entry(1), entry(2)], newest: entry(2) };
  h.hub.session(USER)?.heartbeat();
  await settled();
  h.hub.detach(USER, 'c');
  h.connect('c2', { kind: 'after', seq: 4, epoch: 'ep1' });
  assert.equal(h.hub.owingRotations, 0, 'taken back: the user\'s session again, no longer kept for nobody');
  // Meanwhile another node appends 3..5 again: any read from now on finds latest 5.
  h.p.page = { epoch: 'ep1', firstSeq: 1, latestSeq: 5, entries: [entry(1), entry(2), entry(3, 0x103), entry(4, 0x104), entry(5, 0x105)], newest: entry(5, 0x105) };
  for (let i = 0; i < 3; i++) {
    h.release();
    await settled();
  }
  assert.deepEqual(h.p.rotations, ['ep1']);
  assert.deepEqual(h.frames.get('c2'), ['welcome 1', 'reset ep2 5', 'msg 1', 'msg 2', 'msg 3', 'msg 4', 'msg 5'], 'before: welcome 5, msg 5 alone (the new 3 and 4 skipped)');
});

test('an append another node made at a seq delivered here as another message, notified with its MsgID while the session is kept for its read: the loss is proven, the rotation made with nobody here (Node mock timers)', async (t) => {
  const h = await deliveredFour(t);
  h.hub.session(USER)?.heartbeat(); // its page will show nothing: 1..4 as delivered
  await settled();
  h.hub.detach(USER, 'c');
  assert.equal(h.hub.owingRotations, 1);
  h.hub.notify(USER, 3, entry(3, 0x103).id); // Redis went back to 2 elsewhere, and 3 was taken again
  h.release();
  await settled();
  assert.deepEqual(h.p.rotations, ['ep1'], 'before: the notify went nowhere, the read showed nothing, the loss forgotten');
  assert.equal(h.hub.owingRotations, 0);
});

test('an append made here at a seq delivered as another message, offered while the session is kept for its read: the loss is proven (Node mock timers)', async (t) => {
  const h = await deliveredFour(t);
  h.hub.session(USER)?.heartbeat();
  await settled();
  h.hub.detach(USER, 'c');
  h.hub.offer(USER, entry(3, 0x103), 'ep1', record(0x103));
  h.release();
  await settled();
  assert.deepEqual(h.p.rotations, ['ep1'], 'before: the offer went nowhere');
});

test('a notify without MsgID for a user whose session is kept only for its read: nothing read for nobody (Node mock timers)', async (t) => {
  const h = await deliveredFour(t);
  h.hub.session(USER)?.heartbeat();
  await settled();
  h.hub.detach(USER, 'c');
  const reads = h.p.reads;
  h.hub.notify(USER, 5);
  h.release();
  await settled();
  h.release();
  await settled();
  assert.equal(h.p.reads, reads);
  assert.deepEqual(h.p.rotations, []);
  assert.equal(h.hub.owingRotations, 0);
});
