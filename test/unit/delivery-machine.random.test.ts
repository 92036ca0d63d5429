/**
 * Random interleavings of the delivery machine's events (DESIGN.md §5, §11), beyond
 * delivery-machine.property.test.ts: the inbox recreated (new epoch) or restored (same
 * epoch, less), logins during a fetch (resuming after seqs of the current epoch, a
 * stale epoch, or above the latest), offers of another epoch, failed fetches, pauses,
 * drains and redelivery rounds. Every append is notified or offered. The driver checks
 * order, no skip, the window and one fetch at a time; once events stop, every open
 * connection was welcomed, nothing loops, and every connection ends on the inbox's
 * current epoch. Seeded (MACHINE_SEED changes it) so a failure replays.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { MachineConfig, ResumeRequest } from '../../src/delivery/machine.js';
import { Driver } from './machine-driver.js';
import { OpenConns } from './machine-runs.js';

const PAUSE_WEIGHT = Number(process.env.MACHINE_PAUSE_WEIGHT ?? 1);
type Op =
  | { op: 'login'; kind: 'first' | 'latest' | 'after'; seq: number; ep: 'cur' | 'old' | 'none' }
  | { op: 'logout'; pick: number }
  | { op: 'append'; n: number }
  | { op: 'offer'; otherEpoch: boolean; defer: boolean }
  | { op: 'heartbeat' }
  | { op: 'ack'; pick: number; all: boolean }
  | { op: 'answer' | 'fail' }
  | { op: 'recreate' }
  | { op: 'restore'; x: number }
  | { op: 'pause' | 'drain' | 'due'; pick: number };

const pick = fc.nat(7);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant('login' as const), kind: fc.constantFrom('first' as const, 'latest' as const, 'after' as const), seq: fc.nat(20), ep: fc.constantFrom('cur' as const, 'old' as const, 'none' as const) }), weight: 3 },
  { arbitrary: fc.record({ op: fc.constant('logout' as const), pick }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('append' as const), n: fc.integer({ min: 1, max: 4 }) }), weight: 4 },
  { arbitrary: fc.record({ op: fc.constant('offer' as const), otherEpoch: fc.boolean(), defer: fc.boolean() }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('heartbeat' as const) }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('ack' as const), pick, all: fc.boolean() }), weight: 5 },
  { arbitrary: fc.record({ op: fc.constantFrom('answer' as const, 'fail' as const) }), weight: 6 },
  { arbitrary: fc.record({ op: fc.constant('recreate' as const) }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('restore' as const), x: fc.nat(10) }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constantFrom('pause' as const, 'drain' as const, 'due' as const), pick }), weight: PAUSE_WEIGHT },
);

const configArb: fc.Arbitrary<MachineConfig> = fc.record({
  window: fc.integer({ min: 1, max: 4 }),
  pageMax: fc.integer({ min: 1, max: 5 }),
  ackTimeoutMs: fc.constant(10_000),
  backoffMs: fc.constant([2_000, 4_000]),
  heartbeatMs: fc.constant(25_000),
});

function lastEpoch(d: Driver, conn: string): string | null | undefined {
  const frames = d.seen.get(conn)?.frames ?? [];
  for (let i = frames.length - 1; i >= 0; i--) {
    const f = frames[i] as { t: string; epoch?: string | null };
    if (f.t === 'welcome' || f.t === 'reset') return f.epoch ?? null;
  }
  return undefined;
}

function run(config: MachineConfig, ops: readonly Op[], checkWelcome: boolean): void {
  const d = new Driver(config);
  const conns = new OpenConns(d);
  const open = conns.list;
  let gen = 0;
  let retryDue = false;
  let appended = true;
  const at = (i: number): string | undefined => conns.at(i);
  const reap = (): void => conns.reap();
  for (const o of ops) {
    switch (o.op) {
      case 'login': {
        let resume: ResumeRequest = { kind: o.kind === 'after' ? 'first' : o.kind };
        if (o.kind === 'after') {
          const epoch = o.ep === 'cur' ? (d.inbox.epoch ?? undefined) : o.ep === 'old' ? 'old' : undefined;
          resume = { kind: 'after', seq: o.seq, ...(epoch !== undefined ? { epoch } : {}) };
        }
        conns.login(resume);
        break;
      }
      case 'logout': conns.logout(o.pick); break;
      case 'append': {
        for (let i = 0; i < o.n; i++) d.notify(d.inbox.append(1));
        appended = true;
        break;
      }
      case 'offer':
        if (o.otherEpoch) { d.inbox.recreate(`ep-r${++gen}`); }
        d.offer(undefined, o.defer);
        appended = true;
        break;
      case 'heartbeat':
        if (retryDue) d.heartbeat();
        retryDue = false;
        break;
      case 'ack': {
        const conn = at(o.pick);
        const c = conn === undefined ? undefined : d.m.cursor(conn);
        if (conn === undefined || !c) break;
        d.ack(conn, o.all ? c.sent : Math.min(c.sent, c.acked + 1));
        break;
      }
      case 'answer': case 'fail':
        if (d.pending) {
          if (o.op === 'answer') d.answer();
          else { d.fail(); retryDue = true; }
        } else if (d.rotating && o.op === 'answer') d.rotated();
        break;
      case 'recreate':
        d.inbox.recreate(`ep-r${++gen}`);
        appended = false;
        break;
      case 'pause': case 'drain': case 'due': d.picked(at(o.pick), o.op); break;
      case 'restore':
        if (d.inbox.latest > 0) d.inbox.restoreTo(Math.max(0, d.inbox.latest - 1 - (o.x % d.inbox.latest)));
        break;
    }
    reap();
  }
  for (const conn of open) d.take(d.m.drain(conn));
  if (retryDue) d.heartbeat();
  d.settle();
  reap();
  if (checkWelcome) {
    for (const conn of open) assert.ok(d.seen.get(conn)?.welcomed === true, `${conn} never welcomed after events stopped (fetches ${d.fetches.length})`);
    if (appended && d.inbox.epoch !== null) {
      for (const conn of open) {
        const c = d.m.cursor(conn);
        assert.equal(lastEpoch(d, conn), d.inbox.epoch, `${conn} (inflight ${c?.inflight}, sent ${c?.sent}) not reset to the inbox's epoch after a notified append`);
      }
    }
    return;
  }
  for (let round = 0; round < 1000; round++) {
    d.settle();
    reap();
    let progressed = false;
    for (const conn of open) {
      const c = d.m.cursor(conn);
      if (c && c.sent > c.acked) { d.ack(conn, c.sent); progressed = true; }
    }
    if (!progressed) break;
  }
  d.settle();
  // Only a clean end state: the inbox exists and its latest entry was announced since any recreate/restore.
  for (const conn of open) {
    assert.ok(d.seen.get(conn)?.welcomed, `${conn} not welcomed`);
  }
}

test('random: every connection that logged in is welcomed once events stop', () => {
  fc.assert(fc.property(configArb, fc.array(opArb, { maxLength: 60, size: 'max' }), (config, ops) => run(config, ops, true)), { numRuns: 20000, seed: Number(process.env.MACHINE_SEED ?? 42), includeErrorInReport: true });
});

test('random: order, no skip, window respected, with recreate/restore and late logins', () => {
  fc.assert(fc.property(configArb, fc.array(opArb, { maxLength: 60, size: 'max' }), (config, ops) => run(config, ops, false)), { numRuns: 20000, seed: Number(process.env.MACHINE_SEED ?? 7), includeErrorInReport: true });
});
