/**
 * A page read before Redis gave a user's inbox back with less, delivered after a batch
 * made on the same node took the lost seqs again (DESIGN.md §11; a model review's
 * finding S1, high): the read of 4 and 5 is answered by Redis, and while the node reads
 * their content (the store's getMany: the local store, or another node's partition
 * over HTTP), Redis goes back to 3 and a batch lands at 4..6 here, each append offered
 * to the session mid-read. Before, the page was delivered — the lost 4 and 5, never the
 * new ones, no `reset` — and the read after it found latest 6, no lower than what was
 * sent. Now the offers kept during the read (fetch-cycle.ts `offered`) name other
 * messages at 4 and 5: a new epoch, and the device is reset and sent 1..6 as they are.
 * A private redis-server, the real inbox scripts, hub, session and machine; the store is
 * a stand-in whose reads the test can hold.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { openInbox } from '../harness/checks.js';
import { Hub } from '../../src/delivery/hub.js';
import type { DeliveryConnection } from '../../src/delivery/session.js';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import type { RecordReader } from '../../src/store/record-reader.js';
import type { StoredMessage } from '../../src/store/record.js';
import { createLogger } from '../../src/logger.js';
import { snapshotInbox } from './delivery-fixture.js';

const USER = 'stale-page-user';

test('a page read before Redis went back to 3, its content read while a batch here took 4..6 again: reset under a new epoch and the new 4..6, not the lost 4 and 5', async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { redis: raw, inbox } = await openInbox(steps, own.url, 'rsp:');

  const stored = new Map<string, StoredMessage>();
  let next = 0;
  /** Stores a record and appends it to the inbox; returns its entry and epoch. */
  const append = async (): Promise<{ entry: { seq: number; id: string; kind: MsgKind }; epoch: string; record: StoredMessage }> => {
    const id = encodeMsgId({ partition: 0, kind: MsgKind.user, counter: ++next });
    const record: StoredMessage = { id, kind: MsgKind.user, type: 't', data: { n: next }, ts: 1, expiresAt: Number.MAX_SAFE_INTEGER };
    stored.set(id, record);
    const { seq, epoch } = await inbox.append(USER, id, MsgKind.user);
    return { entry: { seq, id, kind: MsgKind.user }, epoch, record };
  };

  // The store's reads: held when the test says, until it releases them.
  let hold: { called: () => void; go: Promise<void> } | undefined;
  const store: RecordReader = {
    isOpen: true,
    get: async (id) => stored.get(id) ?? null,
    getMany: async (ids) => {
      const h = hold;
      if (h !== undefined) {
        hold = undefined;
        h.called();
        await h.go;
      }
      return ids.map((id) => stored.get(id) ?? null);
    },
  };
  const hub = new Hub({ inbox, store, machine: { window: 10, ackTimeoutMs: 600_000, backoffMs: [600_000], heartbeatMs: 600_000 }, logger: createLogger('silent'), retryMs: 50 }, 100);

  // The device's frames, and a wait for the one that satisfies a test.
  const frames: { t: string; seq?: number; id?: string; epoch?: string }[] = [];
  let waiter: { until: () => boolean; done: () => void } | undefined;
  const until = async (what: string, cond: () => boolean): Promise<void> => {
    if (cond()) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}: ${JSON.stringify(frames)}`)), 10_000);
      waiter = { until: cond, done: () => { clearTimeout(timer); resolve(); } };
    });
  };
  const conn: DeliveryConnection = {
    id: 'c', device: 'phone', close: () => hub.detach(USER, 'c'),
    send: (text) => {
      frames.push(JSON.parse(text.toString()) as { t: string });
      if (waiter?.until() === true) {
        const w = waiter;
        waiter = undefined;
        w.done();
      }
    },
  };
  steps.after(() => hub.closeAll(1001, 'test over'));

  const old = [await append(), await append(), await append()];
  const epoch = old[0]?.epoch as string;
  hub.attach(USER, conn, { kind: 'first' });
  await until('msg 3', () => frames.some((f) => f.t === 'msg' && f.seq === 3));
  const restore = await snapshotInbox(raw, inbox.keys.user(USER));

  // 4 and 5 appended on another node: its notify makes this node read them.
  await append();
  await append();
  let release = (): void => undefined;
  const readingContent = new Promise<void>((called) => {
    hold = { called, go: new Promise<void>((go) => { release = go; }) };
  });
  hub.notify(USER, 5);
  await readingContent;

  // Redis goes back to 3; a batch here lands at 4..6, each append offered mid-read.
  await restore();
  const batch = [await append(), await append(), await append()];
  assert.deepEqual(batch.map((b) => [b.entry.seq, b.epoch]), [[4, epoch], [5, epoch], [6, epoch]]);
  for (const b of batch) hub.offer(USER, b.entry, b.epoch, b.record);
  release();

  await until('msg 6', () => frames.some((f) => f.t === 'msg' && f.seq === 6));
  const seen = frames.filter((f) => f.t !== 'welcome').map((f) => (f.t === 'msg' ? `msg ${String(f.seq)} ${String(f.id)}` : `${f.t} ${String(f.seq)}`));
  const newEpoch = (await inbox.range(USER, 0, 1)).epoch;
  assert.notEqual(newEpoch, epoch, 'a new epoch');
  const ids = [...old, ...batch].map((m) => m.entry.id);
  assert.deepEqual(seen, [
    ...ids.slice(0, 3).map((id, i) => `msg ${i + 1} ${id}`),
    'reset 6',
    ...ids.map((id, i) => `msg ${i + 1} ${id}`),
  ], 'before: msg 4 and 5 of the lost messages, then msg 6, no reset');
});
