/**
 * Property test of the per-user delivery state machine (src/delivery/machine.ts,
 * DESIGN.md §5), with fast-check: random interleavings of its events — login, logout,
 * heartbeat, notify (and offer), ack, pause and drain, fetches answered or failed,
 * redelivery timers — against an in-memory inbox that grows, is trimmed by its cap,
 * and has content expire under it.
 *
 * On every batch of effects the driver (machine-driver.ts, strict mode) checks that
 * frames never go out of order, no seq is skipped or repeated unmarked, a `gap` covers
 * only missing seqs, a `msg` carries its seq's MsgID, the window is never exceeded, at
 * most one fetch is in flight, no ack cursor is written backwards and, given a byte
 * allowance, a page's bytes never exceed it by more than one message, its connection
 * then held and sent no `msg`, in any later batch, until a drain (the gateway's drain
 * after the writes). This file adds
 * that a connection's cursor never moves backwards and, after every run, that once
 * the clients read and ack everything, each connection has got every seq of the inbox.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { MachineConfig, ResumeRequest } from '../../src/delivery/machine.js';
import { Driver } from './machine-driver.js';
import { OpenConns, commonOpArbs, configArb, type CommonOp } from './machine-runs.js';

/** One event of a run; `pick` chooses among the connections open at that point. */
type Op = { op: 'login'; resume: 'first' | 'latest' | 'after'; seq: number; staleEpoch: boolean } | CommonOp;

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant('login' as const), resume: fc.constantFrom('first' as const, 'latest' as const, 'after' as const), seq: fc.nat(30), staleEpoch: fc.boolean() }), weight: 2 },
  ...commonOpArbs(2),
);

/**
 * Runs one interleaving, then the clients catch up; throws on any broken rule.
 * @param noInbox the user starts with no inbox (epoch null): the first append creates it
 * @param everyNotify every append is notified, and the only heartbeat is the one that
 *   retries a failed fetch (session.ts): the clients must catch up with no other
 *   heartbeat, since a heartbeat is what only a lost notify may wait for (DESIGN.md §5)
 */
/** @returns the pages cut at the allowance (Driver `holds`) */
function run(config: MachineConfig, ops: readonly Op[], noInbox: boolean, everyNotify = false, allowance?: number): number {
  const d = new Driver(config, { strict: true, allowance });
  if (noInbox) d.inbox.recreate(null);
  /** Each open connection's ack cursor as last seen, to catch one moving backwards. */
  const lastAcked = new Map<string, number>();
  const conns = new OpenConns(d, (conn) => lastAcked.delete(conn));
  const open = conns.list;
  /** A fetch failed and its retry (a heartbeat) is due. */
  let retryDue = false;
  const at = (i: number): string | undefined => conns.at(i);
  const reap = (): void => conns.reap();
  const checkCursors = (): void => {
    for (const conn of open) {
      const c = d.m.cursor(conn);
      const before = lastAcked.get(conn) ?? 0;
      // Cursors restart only on a `reset`, which this run (no recreate, no restore) never sends.
      if (c) assert.ok(c.acked >= before, `${conn}: ack cursor moved back from ${before} to ${c.acked}`);
      if (c) lastAcked.set(conn, c.acked);
    }
  };

  for (const o of ops) {
    switch (o.op) {
      case 'login': {
        let resume: ResumeRequest = { kind: o.resume === 'after' ? 'first' : o.resume };
        if (o.resume === 'after') resume = o.staleEpoch ? { kind: 'after', seq: o.seq, epoch: 'old' } : { kind: 'after', seq: o.seq };
        conns.login(resume);
        break;
      }
      case 'logout': conns.logout(o.pick); break;
      case 'append': {
        const seq = d.inbox.append(o.n);
        // A notify may be lost (another node's Pub/Sub): the heartbeat covers it.
        if (o.notify || everyNotify) d.notify(seq);
        break;
      }
      case 'offer':
        d.offer(undefined, o.defer);
        break;
      case 'heartbeat':
        if (!everyNotify || retryDue) d.heartbeat();
        retryDue = false;
        break;
      case 'ack': d.picked(at(o.pick), 'ack', o.how, o.x); break;
      case 'pause': case 'drain': case 'due': d.picked(at(o.pick), o.op); break;
      case 'answer': case 'fail':
        if (d.pending) {
          if (o.op === 'answer') d.answer();
          else {
            d.fail();
            retryDue = true;
          }
        }
        break;
      case 'expire':
        if (d.inbox.latest > 0) d.inbox.expire(1 + (o.x % d.inbox.latest));
        break;
      case 'trim':
        d.inbox.trimTo(Math.min(d.inbox.latest + 1, d.inbox.first + o.x));
        break;
    }
    reap();
    checkCursors();
  }

  // The clients now read and ack everything, and heartbeats keep coming (they pull what
  // a lost notify did not announce): every open connection must reach the inbox's
  // latest seq, with every seq between its start and there sent as a msg or a gap (the
  // driver checked that no seq was skipped on the way).
  for (const conn of open) d.drain(conn);
  if (everyNotify && retryDue) d.heartbeat();
  for (let round = 0; round < 1000; round++) {
    // A page cut at the allowance waits for its writes to drain: they do, the clients reading.
    if (allowance !== undefined) for (const conn of open) d.drain(conn);
    if (!everyNotify) d.heartbeat();
    d.settle();
    reap();
    let progressed = false;
    for (const conn of open) {
      const c = d.m.cursor(conn);
      if (c && c.sent > c.acked) {
        d.ack(conn, c.sent);
        progressed = true;
      }
    }
    if (!progressed) break;
  }
  d.settle();
  checkCursors();
  for (const conn of open) {
    const c = d.m.cursor(conn);
    const high = d.seen.get(conn)?.high;
    assert.ok(c, `${conn} is open`);
    assert.equal(c.sent, d.inbox.latest, `${conn} stopped at seq ${c.sent} of ${d.inbox.latest}`);
    assert.equal(high, d.inbox.latest, `${conn}'s frames reach seq ${high} of ${d.inbox.latest}`);
    assert.equal(c.inflight, 0, `${conn} still has ${c.inflight} unacked`);
  }
  return d.holds;
}

test('random interleavings of the machine\'s events keep order, skip nothing, respect the window and never move a cursor back', () => {
  fc.assert(fc.property(configArb, fc.array(opArb, { maxLength: 80, size: 'max' }), fc.boolean(), (config, ops, noInbox) => { run(config, ops, noInbox); }), { numRuns: 3000, includeErrorInReport: true });
});

test('with a byte allowance, pages stop at it (never past it by more than one message) and the rest follows each drain: the same rules, and every seq once', () => {
  // A `msg` of the fake inbox is ~150 bytes as sized: up to 800 bytes cuts pages after 1 – 6 of them.
  let cut = 0;
  fc.assert(fc.property(configArb, fc.array(opArb, { maxLength: 80, size: 'max' }), fc.boolean(), fc.nat(800), fc.boolean(), (config, ops, noInbox, allowance, everyNotify) => {
    cut += run(config, ops, noInbox, everyNotify, allowance);
  }), { numRuns: 3000, includeErrorInReport: true });
  assert.ok(cut > 100, `only ${cut} pages were cut`);
});

test('with every append notified, the clients catch up by their acks alone: no connection waits for a heartbeat', () => {
  fc.assert(fc.property(configArb, fc.array(opArb, { maxLength: 80, size: 'max' }), fc.boolean(), (config, ops, noInbox) => { run(config, ops, noInbox, true); }), { numRuns: 20000, includeErrorInReport: true });
});
