/**
 * A hand driver for the per-user delivery state machine (src/delivery/machine.ts),
 * shared by its example tests (delivery-machine.test.ts) and its property tests
 * (delivery-machine.property.test.ts and others). It applies the machine's effects: a
 * `fetch` is answered from a small in-memory inbox (fake-inbox.ts) with the page Redis
 * would give, a `rotate-epoch` is carried out on it, and sends, timers, acks, closes and
 * holds are recorded for the tests to read. Every batch goes through the checks of
 * machine-checks.ts (the rules that must hold whatever happens); the driver itself checks
 * that at most one fetch and one rotation are in flight.
 */
import assert from 'node:assert/strict';
import { UserMachine, type Effect, type MachineConfig, type ResumeRequest } from '../../src/delivery/machine.js';
import type { ServerFrame } from '../../src/delivery/frames.js';
import { isUnreadable } from '../../src/store/unreadable.js';
import { FakeInbox } from './fake-inbox.js';
import { MachineChecks, briefOf, type Seen } from './machine-checks.js';

export { FakeInbox } from './fake-inbox.js';
export { briefOf } from './machine-checks.js';
export type { Seen } from './machine-checks.js';

/** A small window and the default timings. */
export const CONFIG: MachineConfig = { window: 3, ackTimeoutMs: 10_000, backoffMs: [2_000, 4_000, 6_000], heartbeatMs: 25_000 };
/** A first login: no resume claim. */
export const FIRST: ResumeRequest = { kind: 'first' };

/** A `fetch` effect of the machine. */
export type FetchEffect = Extract<Effect, { kind: 'fetch' }>;

/** Drives a machine by hand: records effects, answers fetches from the fake inbox. */
export class Driver {
  readonly m: UserMachine;
  readonly inbox = new FakeInbox();
  /** The checks every batch goes through ({@link take}). */
  readonly #checks: MachineChecks;
  /** The fetch in flight and the snapshot it read (Redis answers as of the read). */
  pending: { effect: FetchEffect; snapshot: ReturnType<FakeInbox['read']> } | undefined;
  /** Every `fetch` effect, in order. */
  fetches: FetchEffect[] = [];
  /** Per connection, what it was sent (kept by the checks). */
  readonly seen: Map<string, Seen>;
  /** Per connection, the delay of its redelivery timer, ms; null: not armed. */
  readonly timers = new Map<string, number | null>();
  /** The ack cursors written, in order. */
  readonly acks: { device: string; seq: number }[] = [];
  /** The connections closed, with their close codes, in order. */
  readonly closes: { conn: string; code: number }[] = [];
  /** A `rotate-epoch` was asked for and not yet answered ({@link rotated}). */
  rotating = false;
  /** The epochs each `rotate-epoch` asked to replace, in order. */
  readonly rotations: string[] = [];
  /** The cause each `rotate-epoch` gave, in order. */
  readonly rotationCauses: string[] = [];
  /** The `readLatest` each `rotate-epoch` gave (a claim's), in order. */
  readonly rotationReads: (number | undefined)[] = [];
  /** The sends marked `live` (timed for the delivery lag), as `<conn> <seq>`, in order. */
  readonly live: string[] = [];
  /** Every connection's byte allowance (effects.ts `ByteRoom`); undefined: none given. */
  readonly #allowance: number | undefined;
  /** The `hold` effects seen (pages cut at the allowance). */
  holds = 0;

  /**
   * @param config the machine's config ({@link CONFIG} by default)
   * @param strict also check each frame against the inbox as it is now: a `msg` carries
   *   the MsgID of its seq, and a `gap` covers only seqs that are missing
   *   (`FakeInbox.isMissing`; trims and expiries are one-way, so what a fetch read as
   *   missing still is). Only for runs that never recreate or restore the inbox.
   * @param allowance every connection's byte allowance: a page cut at it holds the
   *   connection until a `drain`, which the caller then owes it
   */
  constructor(config: MachineConfig = CONFIG, { strict = false, allowance }: { strict?: boolean; allowance?: number } = {}) {
    this.#allowance = allowance;
    this.m = new UserMachine('u1', config);
    this.#checks = new MachineChecks(this.m, this.inbox, config, strict, allowance);
    this.seen = this.#checks.seen;
  }

  /** Records one batch of effects and checks the invariants. */
  take(effects: Effect[]): Effect[] {
    this.#checks.beginBatch();
    for (const e of effects) {
      switch (e.kind) {
        case 'fetch':
          assert.equal(this.pending, undefined, 'a second fetch was started while one is in flight');
          assert.ok(e.limit >= 1);
          // An offer's deferred delivery carries its answer: nothing is read (machine.ts `offer`).
          this.pending = { effect: e, snapshot: e.offered === undefined ? this.inbox.read(e.afterSeq, e.limit) : { page: e.offered.page, records: [...e.offered.records] } };
          this.fetches.push(e);
          break;
        case 'send':
          this.#checks.sent(e);
          if (e.live === true && e.frame.t === 'msg') this.live.push(`${e.conn} ${e.frame.seq}`);
          break;
        case 'timer':
          this.timers.set(e.conn, e.delayMs);
          break;
        case 'ack':
          this.acks.push({ device: e.device, seq: e.seq });
          this.#checks.acked(e.device, e.seq, e.epoch);
          break;
        case 'close':
          this.closes.push({ conn: e.conn, code: e.code });
          break;
        case 'hold':
          this.#checks.held(e.conn);
          this.holds++;
          break;
        case 'rotate-epoch':
          assert.equal(this.rotating, false, 'a second rotate-epoch while one is in flight');
          this.rotating = true;
          this.rotations.push(e.epoch);
          this.rotationCauses.push(e.cause);
          this.rotationReads.push(e.readLatest);
          break;
      }
    }
    this.#checks.endBatch();
    return effects;
  }

  /** Answers the fetch in flight with the snapshot it read, and the lineage when the machine wants it (read after the page, as session.ts does). */
  answer(): Effect[] {
    const p = this.pending;
    assert.ok(p, 'no fetch in flight');
    this.pending = undefined;
    const page = p.snapshot.page;
    // As lineage.ts reads it: only one about the inbox's epoch now.
    const known = this.inbox.lineage?.epoch === this.inbox.epoch ? this.inbox.lineage : undefined;
    return this.take(this.m.fetched(page, p.snapshot.records, this.m.wantsLineage(page) ? known : undefined));
  }

  /** Performs the `rotate-epoch` asked for on the inbox, and answers `epochRotated`. */
  rotated(): Effect[] {
    assert.ok(this.rotating, 'no rotate-epoch in flight');
    this.rotating = false;
    const kept = this.inbox.rotateEpoch(this.rotations[this.rotations.length - 1] as string, this.rotationCauses[this.rotationCauses.length - 1], this.rotationReads[this.rotationReads.length - 1]);
    return this.take(this.m.epochRotated(kept ? 'kept' : 'made'));
  }

  /** The `rotate-epoch` asked for failed (Redis down, a timeout): the inbox keeps its epoch; answers `epochRotated('failed')`. */
  rotationFailed(): Effect[] {
    assert.ok(this.rotating, 'no rotate-epoch in flight');
    this.rotating = false;
    return this.take(this.m.epochRotated('failed'));
  }

  /** Answers fetches and epoch rotations until none is in flight; a fetch loop fails the test. */
  settle(): void {
    for (let i = 0; this.pending || this.rotating; i++) {
      assert.ok(i < 100, 'fetch loop: 100 fetches without settling');
      if (this.rotating) this.rotated();
      else this.answer();
    }
  }

  /** The fetch in flight failed; an offer's deferred delivery never fails (no read: session.ts): answered instead. */
  fail(): Effect[] {
    assert.ok(this.pending, 'no fetch in flight');
    if (this.pending.effect.offered !== undefined) return this.answer();
    this.pending = undefined;
    return this.take(this.m.fetchFailed());
  }

  login(conn: string, resume: ResumeRequest = FIRST, device = `dev-${conn}`): Effect[] {
    const allowance = this.#allowance;
    return this.take(this.m.login(conn, device, resume, allowance === undefined ? undefined : { byteAllowance: () => ({ bytes: allowance, byBudget: false }) }));
  }

  ack(conn: string, seq: number): Effect[] {
    return this.take(this.m.ack(conn, seq));
  }

  notify(seq?: number): Effect[] {
    return this.take(this.m.notify(seq));
  }

  /** The connection's writes drained (the gateway's drain): a page held on it may go on. */
  drain(conn: string): Effect[] {
    this.#checks.drained(conn);
    return this.take(this.m.drain(conn));
  }

  heartbeat(): Effect[] {
    return this.take(this.m.heartbeat());
  }

  /**
   * Appends one message to the inbox and offers it (a local append: the entry, its
   * epoch and its record, as ingest hands them over); `epoch` overrides the inbox's;
   * `defer`: in a turn that has written its share (send-turns.ts).
   */
  offer(epoch?: string, defer = false): Effect[] {
    return this.offerAppended(this.inbox.append(), epoch, defer);
  }

  /** Offers `seq`, already in the inbox (a local append whose offer comes after a read saw it). */
  offerAppended(seq: number, epoch?: string, defer = false): Effect[] {
    const { page, records } = this.inbox.read(seq - 1, 1);
    const entry = page.entries[0];
    const record = records[0];
    assert.ok(entry && entry.malformed !== true && record && !isUnreadable(record));
    return this.take(this.m.offer(entry, epoch ?? this.inbox.epoch ?? '', record, defer));
  }

  /** The connection's redelivery timer fired (and so is no longer armed). */
  due(conn: string): Effect[] {
    this.timers.set(conn, null);
    return this.take(this.m.redeliveryDue(conn));
  }

  /**
   * The connection events the property tests pick at random, on `conn` (undefined:
   * none picked, nothing done): an ack of all it was sent, of `x` taken within its
   * unacked seqs (`some`) or of `x` as it is (`wild`); a pause, a drain, or its
   * redelivery timer firing when it is armed.
   */
  picked(conn: string | undefined, op: 'ack' | 'pause' | 'drain' | 'due', how: 'all' | 'some' | 'wild' = 'all', x = 0): void {
    if (conn === undefined) return;
    if (op === 'ack') {
      const c = this.m.cursor(conn);
      if (!c) return;
      let seq = x;
      if (how === 'all') seq = c.sent;
      else if (how === 'some') seq = c.sent > c.acked ? c.acked + 1 + (x % (c.sent - c.acked)) : c.acked;
      this.ack(conn, seq);
    } else if (op === 'pause' || op === 'drain') {
      if (op === 'pause') this.take(this.m.pause(conn));
      else this.drain(conn);
    } else if (this.timers.get(conn) != null) {
      this.due(conn);
    }
  }

  /** Frames sent on `conn` since the last call (they are forgotten here, not by the checks). */
  frames(conn: string): ServerFrame[] {
    const s = this.seen.get(conn);
    if (!s) return [];
    const out = s.frames;
    s.frames = [];
    return out;
  }

  /** Frames since the last call, in a compact form: `msg 3`, `msg 3 r`, `gap 4-6 trimmed`, `gap 2-2 expired r`, `reset`… */
  brief(conn: string): string[] {
    return this.frames(conn).map(briefOf);
  }
}
