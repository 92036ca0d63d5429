/**
 * A session kept by the hub for an epoch rotation it owes after its user's last
 * connection here closed (src/delivery/hub.ts `#owing`; docs/decisions.md "Redis with
 * less than it had"): it leaves the hub once the rotation is made, and a shutdown stops
 * its retries. The gateway test (test/gateway/rotation-owed-offline.test.ts) shows the
 * rotation is made offline; this one that the session is not kept forever after it, nor
 * retried after `closeAll`. The inbox is a stand-in whose rotations fail until told
 * otherwise (Redis down); the hub, its sessions and their machines are the real ones.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { Hub } from '../../src/delivery/hub.js';
import type { DeliveryConnection } from '../../src/delivery/session.js';
import { MAX_RETRY_FACTOR } from '../../src/delivery/retry-backoff.js';
import { createLogger } from '../../src/logger.js';
import { CONFIG } from './machine-driver.js';
import { entry, PagedInbox, record, records, settled } from './paged-inbox.js';

const RETRY_MS = 20;
/** A clock step longer than the longest retry wait (session.ts). */
const STEP_MS = RETRY_MS * MAX_RETRY_FACTOR * 2;
/** How the stand-in inbox answers a rotation: fail (Redis down), make it, or hold it until the test says. */
type RotationAnswer = 'fail' | 'make' | 'hold';

interface Owing {
  hub: Hub;
  user: string;
  /** The stand-in inbox: its rotation calls and reads. */
  p: PagedInbox;
  /** How the next rotation calls are answered. */
  answer(a: RotationAnswer): void;
  /** Settles a held rotation call: `made` true makes it, false fails it. */
  release(made: boolean): void;
}

/**
 * A user sent seqs 1..4 over one connection; Redis lost 3 and 4 and an append here took
 * seq 4 again: the rotation asked for fails (or, with `first` 'hold', is still in flight).
 * With `offline`, the connection then closes, and the hub keeps the session (it owes the
 * rotation).
 */
async function owingRotation(t: TestContext, offline: boolean, first: RotationAnswer = 'fail'): Promise<Owing> {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  let answer: RotationAnswer = first;
  let held: ((made: boolean) => void) | undefined;
  const p = new PagedInbox({ epoch: 'ep1', firstSeq: 1, latestSeq: 4, entries: [1, 2, 3, 4].map((s) => entry(s)) }, async (self) => {
    const ok = answer === 'hold' ? await new Promise<boolean>((resolve) => { held = resolve; }) : answer === 'make';
    if (!ok) throw new Error('redis down');
    self.page = { ...self.page, epoch: 'ep2' };
    return 'ep2';
  });
  const hub = new Hub({ inbox: p.inbox, store: records, machine: { ...CONFIG, window: 10 }, logger: createLogger('silent'), retryMs: RETRY_MS }, 100);
  const user = 'u';
  const conn: DeliveryConnection = { id: 'c', device: 'phone', send: () => undefined, close: () => hub.detach(user, 'c') };
  hub.attach(user, conn, { kind: 'first' });
  await settled();
  p.page = { epoch: 'ep1', firstSeq: 1, latestSeq: 4, entries: [entry(1), entry(2), entry(3, 0x103), entry(4, 0x104)] };
  hub.offer(user, entry(4, 0x104), 'ep1', record(0x104));
  await settled();
  assert.deepEqual(p.rotations, ['ep1'], 'the rotation was asked for');
  if (offline) {
    hub.detach(user, 'c');
    assert.equal(hub.has(user), false);
    assert.equal(hub.owingRotations, 1, 'kept: it owes the rotation');
  }
  return {
    hub, user, p,
    answer: (a) => { answer = a; },
    release: (ok) => {
      assert.ok(held !== undefined, 'a rotation call is held');
      const settle = held;
      held = undefined;
      settle(ok);
    },
  };
}

/** Moves the mocked clock on past several retry waits, letting what each fires run. */
async function waitPastRetries(t: TestContext): Promise<void> {
  for (let i = 0; i < 8; i++) {
    t.mock.timers.tick(STEP_MS);
    await settled();
  }
}

test('a session kept for a rotation it owes with no connection left is kept while Redis refuses it, and leaves the hub once it is made (Node mock timers)', async (t) => {
  const o = await owingRotation(t, true);
  await waitPastRetries(t);
  assert.ok(o.p.rotations.length >= 3, `retried while Redis refuses it (${String(o.p.rotations.length)} calls)`);
  assert.equal(o.hub.owingRotations, 1, 'still kept while it is not made');

  o.answer('make');
  await waitPastRetries(t);
  assert.equal(o.hub.owingRotations, 0, 'no longer kept once the rotation is made');
  assert.equal(o.hub.has(o.user), false);
  const calls = o.p.rotations.length;
  const reads = o.p.reads;
  await waitPastRetries(t);
  assert.equal(o.p.rotations.length, calls, 'not asked again');
  assert.equal(o.p.reads, reads, 'nothing read for nobody');
});

test('shutdown stops the retries of a rotation owed with no connection left: the retry armed is not sent (Node mock timers)', async (t) => {
  const o = await owingRotation(t, true);
  const calls = o.p.rotations.length;
  o.hub.closeAll(1001, 'shutdown');
  assert.equal(o.hub.owingRotations, 0, 'given up: lost with the process');
  await waitPastRetries(t);
  assert.equal(o.p.rotations.length, calls, 'the retry armed before the shutdown was not sent');
});

test('shutdown while an owed rotation\'s retry is in flight: its failure arms no retry (Node mock timers)', async (t) => {
  const o = await owingRotation(t, true);
  o.answer('hold');
  await waitPastRetries(t);
  const calls = o.p.rotations.length;
  assert.ok(calls >= 2, 'the retry is in flight');
  o.hub.closeAll(1001, 'shutdown');
  o.release(false);
  await settled();
  await waitPastRetries(t);
  assert.equal(o.p.rotations.length, calls, 'no retry after the in-flight call failed');
  assert.equal(o.hub.owingRotations, 0);
});

test('shutdown with the user still connected while a rotation is owed: its connection closes and no retry follows (Node mock timers)', async (t) => {
  const o = await owingRotation(t, false);
  const calls = o.p.rotations.length;
  // The connection's close detaches it, as the gateway's close handler does.
  o.hub.closeAll(1001, 'shutdown');
  assert.equal(o.hub.has(o.user), false);
  assert.equal(o.hub.owingRotations, 0, 'not kept during a shutdown');
  await waitPastRetries(t);
  assert.equal(o.p.rotations.length, calls, 'the retry armed while connected was not sent');
});

test('shutdown while the first rotation is in flight, the user still connected: its failure arms no retry, though the session had no back-off yet (Node mock timers)', async (t) => {
  const o = await owingRotation(t, false, 'hold');
  o.hub.closeAll(1001, 'shutdown');
  assert.equal(o.hub.has(o.user), false);
  assert.equal(o.hub.owingRotations, 0, 'not kept during a shutdown');
  o.release(false);
  await settled();
  await waitPastRetries(t);
  assert.deepEqual(o.p.rotations, ['ep1'], 'not asked again after the shutdown');
});
