/**
 * Random interleavings of the delivery machine's events (as
 * delivery-machine.property.test.ts), checking what that test does not:
 * - a connection with messages in flight always has its redelivery timer armed;
 * - no `msg` or `gap` repeats a seq already sent on the connection without the
 *   `redelivered` mark (a `gap` included: docs/protocol.md), and a `msg` marked after a
 *   `reset` is a message sent on it before (machine-checks.ts checks its id);
 * - once events stop, a client that never acks is redelivered to and closed 4008,
 *   never left with messages in flight and no timer;
 * also with entries deleted by hand (holes), and with the inbox recreated or restored
 * and acks naming an epoch, and rotations that keep the numbering (made elsewhere, after
 * a restore too, or asked for by a device's claim). MACHINE_RUNS sets the runs per test, MACHINE_SEED the seed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { MachineConfig, ResumeRequest } from '../../src/delivery/machine.js';
import { Driver } from './machine-driver.js';
import { OpenConns, commonOpArbs, configArb, pickArb, type CommonOp } from './machine-runs.js';

let gen = 0;

type Op =
  | { op: 'login'; resume: 'first' | 'latest' | 'after'; seq: number }
  | CommonOp
  | { op: 'hole'; x: number }
  | { op: 'recreate' } | { op: 'restore'; x: number } | { op: 'offerOther' } | { op: 'ackEpoch'; pick: number; old: boolean }
  | { op: 'rotate'; x: number } | { op: 'claim'; x: number };

/** The events of a run: holes (entries deleted by hand) and recreations (and acks naming epochs) weighted as given. */
const opArbOf = (holes: number, recreate: number): fc.Arbitrary<Op> => fc.oneof(
  { arbitrary: fc.record({ op: fc.constant('login' as const), resume: fc.constantFrom('first' as const, 'latest' as const, 'after' as const), seq: fc.nat(30) }), weight: 2 },
  ...commonOpArbs(3),
  { arbitrary: fc.record({ op: fc.constant('hole' as const), x: fc.nat(40) }), weight: holes },
  { arbitrary: fc.record({ op: fc.constant('recreate' as const) }), weight: recreate },
  { arbitrary: fc.record({ op: fc.constant('offerOther' as const) }), weight: recreate },
  { arbitrary: fc.record({ op: fc.constant('restore' as const), x: fc.nat(10) }), weight: recreate },
  { arbitrary: fc.record({ op: fc.constant('ackEpoch' as const), pick: pickArb, old: fc.boolean() }), weight: recreate * 3 },
  { arbitrary: fc.record({ op: fc.constant('rotate' as const), x: fc.nat(10) }), weight: recreate * 2 },
  { arbitrary: fc.record({ op: fc.constant('claim' as const), x: fc.nat(5) }), weight: recreate },
);

function run(config: MachineConfig, ops: readonly Op[], strict: boolean): void {
  const d = new Driver(config, { strict });
  const conns = new OpenConns(d);
  const open = conns.list;
  const at = (i: number): string | undefined => conns.at(i);
  const reap = (): void => conns.reap();
  const checkTimers = (): void => {
    for (const conn of open) {
      const c = d.m.cursor(conn);
      if (c && c.inflight > 0) assert.ok(d.timers.get(conn) != null, `${conn} has ${c.inflight} in flight and no timer (sent ${c.sent} acked ${c.acked})`);
    }
  };
  /** Per connection: frames checked, the highest seq sent (null after a reset), and whether the last frame was its welcome. */
  const highs = new Map<string, { n: number; high: number | null; notice: boolean }>();
  const checkMarks = (): void => {
    for (const [conn, seen] of d.seen) {
      const h = highs.get(conn) ?? { n: 0, high: null, notice: false };
      highs.set(conn, h);
      for (; h.n < seen.frames.length; h.n++) {
        const f = seen.frames[h.n];
        if (f === undefined) break;
        if (f.t === 'welcome') { h.high = f.resume_from - 1; h.notice = true; continue; }
        // The gap a welcome is followed by (what the resume cannot get) repeats nothing.
        const notice = h.notice;
        h.notice = false;
        if (notice && f.t === 'gap' && f.to === h.high) continue;
        if (f.t === 'reset') { h.high = null; continue; }
        else if (f.t === 'gap' || f.t === 'msg') {
          const from = f.t === 'gap' ? f.from : f.seq;
          const to = f.t === 'gap' ? f.to : f.seq;
          if (f.redelivered !== true && h.high !== null) assert.ok(from > h.high, `${conn}: unmarked ${f.t} ${from}-${to} repeats seqs up to ${h.high}`);
          h.high = Math.max(h.high ?? 0, to);
        }
      }
    }
  };
  for (const o of ops) {
    switch (o.op) {
      case 'login': {
        const resume: ResumeRequest = o.resume === 'after' ? { kind: 'after', seq: o.seq } : { kind: o.resume };
        conns.login(resume);
        break;
      }
      case 'logout': conns.logout(o.pick); break;
      case 'append': { const seq = d.inbox.append(o.n); if (o.notify) d.notify(seq); break; }
      case 'offer': d.offer(undefined, o.defer); break;
      case 'heartbeat': d.heartbeat(); break;
      case 'ack': d.picked(at(o.pick), 'ack', o.how, o.x); break;
      case 'pause': case 'drain': case 'due': d.picked(at(o.pick), o.op); break;
      case 'answer': case 'fail':
        if (d.pending) { if (o.op === 'answer') d.answer(); else d.fail(); }
        break;
      case 'expire': if (d.inbox.latest > 0) d.inbox.expire(1 + (o.x % d.inbox.latest)); break;
      case 'trim': d.inbox.trimTo(Math.min(d.inbox.latest + 1, d.inbox.first + o.x)); break;
      case 'recreate': d.inbox.holes.clear(); d.inbox.recreate(`ep-r${++gen}`); break;
      case 'offerOther': d.inbox.holes.clear(); d.inbox.recreate(`ep-r${++gen}`); d.offer(); break;
      case 'restore': d.inbox.holes.clear(); if (d.inbox.latest > 0) d.inbox.restoreTo(Math.max(0, d.inbox.latest - 1 - (o.x % d.inbox.latest))); break;
      case 'ackEpoch': {
        const conn = at(o.pick);
        const c = conn === undefined ? undefined : d.m.cursor(conn);
        if (conn === undefined || !c) break;
        const frames = d.seen.get(conn)?.frames ?? [];
        let ep: string | null | undefined;
        for (const f of frames) if (f.t === 'welcome' || f.t === 'reset') ep = f.epoch;
        d.take(d.m.ack(conn, c.sent, o.old ? 'zzz-old' : (ep ?? undefined)));
        break;
      }
      case 'hole': if (d.inbox.latest > 0) d.inbox.holes.add(1 + (o.x % d.inbox.latest)); break;
      case 'rotate': {
        // Another node rotates, keeping the numbering (a generation's); at odd x after a
        // restore whose lost seqs were assigned again there first (the lineage vouches for them).
        const epoch = d.inbox.epoch;
        if (epoch === null) break;
        if (o.x % 2 === 1 && d.inbox.latest > 0) {
          d.inbox.holes.clear();
          d.inbox.restoreTo(Math.max(0, d.inbox.latest - 1 - (o.x % d.inbox.latest)));
          d.inbox.append(1 + (o.x % 3));
        }
        d.inbox.rotateEpoch(epoch, 'generation');
        break;
      }
      case 'claim': {
        // A device claims a last_seq above the latest under the inbox's epoch: a resume rotation.
        const epoch = d.inbox.epoch;
        if (epoch !== null) conns.login({ kind: 'after', seq: d.inbox.latest + 1 + o.x, epoch });
        break;
      }
    }
    reap();
    checkTimers();
    checkMarks();
  }
  // Liveness of the 4008 rule: drain all, answer fetches, then never ack: every connection with something unacked ends closed.
  for (const conn of open) d.take(d.m.drain(conn));
  d.heartbeat();
  d.settle();
  for (let i = 0; i < 50; i++) {
    let any = false;
    for (const conn of [...open]) {
      if (d.timers.get(conn) != null) { d.due(conn); any = true; }
    }
    d.settle();
    reap();
    if (!any) break;
  }
  for (const conn of open) {
    const c = d.m.cursor(conn);
    assert.ok(!c || c.inflight === 0, `${conn} has ${c?.inflight} unacked and was neither redelivered to death nor closed; timer ${d.timers.get(conn)}`);
  }
}

for (const [name, holes, recreate] of [['', 0, 0], [', with entries deleted by hand', 1, 0], [', with the inbox recreated or restored and acks naming epochs', 0, 1]] as const) {
  test(`random events: a connection with messages in flight always has its redelivery timer, no frame repeats seqs unmarked, and one that never acks is redelivered to 4008${name}`, () => {
    fc.assert(fc.property(configArb, fc.array(opArbOf(holes, recreate), { maxLength: 80, size: 'max' }), (config, ops) => run(config, ops, recreate === 0)),
      { numRuns: Number(process.env.MACHINE_RUNS ?? 20000), seed: Number(process.env.MACHINE_SEED ?? 11), includeErrorInReport: true });
  });
}
