/**
 * A hand driver for the per-user delivery state machine (src/delivery/machine.ts),
 * shared by its example tests (delivery-machine.test.ts) and its property test
 * (delivery-machine.property.test.ts). A small in-memory inbox answers each `fetch`
 * effect with the page Redis would give (a double of data, not of the network); the
 * driver records every effect and checks, on every batch, the rules that must hold
 * whatever happens: at most one fetch in flight, `welcome` first, no seq skipped or
 * repeated unmarked on a connection (and, strict, each `gap` of seqs missing for its `reason`), never more than the window in flight, and no ack
 * cursor written backwards within an epoch; given a byte allowance, that no connection's
 * page exceeds it by more than one message, and that a connection whose page was cut
 * (a `hold`) is sent no `msg` until the driver's {@link Driver.drain} of it.
 */
import assert from 'node:assert/strict';
import { UserMachine, type Effect, type MachineConfig, type ResumeRequest } from '../../src/delivery/machine.js';
import type { ServerFrame } from '../../src/delivery/frames.js';
import type { GapReason } from '../../src/delivery/message-view.js';
import type { InboxEntry, InboxPage } from '../../src/inbox/inbox.js';
import type { EpochLineage } from '../../src/inbox/lineage.js';
import { isUnreadable, unreadableRecord, type ReadRecord } from '../../src/store/unreadable.js';
import { MsgKind } from '../../src/ids/msg-id.js';
import { gapFrameSize, msgFrameSize } from '../../src/delivery/msg-frame-bytes.js';

/** A small window and the default timings. */
export const CONFIG: MachineConfig = { window: 3, ackTimeoutMs: 10_000, backoffMs: [2_000, 4_000, 6_000], heartbeatMs: 25_000 };
export const FIRST: ResumeRequest = { kind: 'first' };

export type FetchEffect = Extract<Effect, { kind: 'fetch' }>;

/** One user's inbox in memory, with the semantics of `Inbox.range` (InboxPage's doc). */
export class FakeInbox {
  epoch: string | null = 'ep1';
  latest = 0;
  /** Oldest retained seq; `latest + 1` when nothing is retained. */
  first = 1;
  readonly #content = new Map<number, ReadRecord | null>();
  /** Bumped when the inbox is recreated or restored: a seq reused then names another message. */
  #generation = 0;
  /** The meta's `lineage` (src/inbox/lineage.ts): set by a rotation, kept by a recreation (it then names another epoch). */
  lineage: EpochLineage | undefined;

  /** The MsgID at `seq` in this generation of the inbox. */
  idOf(seq: number): string {
    return (this.#generation * 2 ** 40 + seq).toString(16).padStart(16, '0');
  }

  /** Appends `n` messages; returns the last seq. An inbox that does not exist (epoch null) is created by the first, in a new epoch, as the append script does. */
  append(n = 1): number {
    if (this.epoch === null) this.epoch = `ep-created-${this.#generation}`;
    for (let i = 0; i < n; i++) {
      this.latest += 1;
      const seq = this.latest;
      this.#content.set(seq, { id: this.idOf(seq), kind: MsgKind.user, type: 'chat', data: { n: seq }, ts: 1_000 + seq, expiresAt: 9e15 });
    }
    return this.latest;
  }

  /** Seqs whose content expired (one-way, like trims: a fetch that read one so may be answered after a trim). */
  readonly #expired = new Set<number>();

  /** The content of these seqs expired in the store (the inbox entries stay). */
  expire(...seqs: number[]): void {
    for (const s of seqs) {
      this.#content.set(s, null);
      this.#expired.add(s);
    }
  }

  /** The time the machine judges expiry by (its config's `now`, when a test gives it this clock), ms. */
  nowMs = 0;

  /** The content of `seq` expires at `ms` (read until then; sent after it only as an `expired` gap). */
  expiresAt(seq: number, ms: number): void {
    const record = this.#content.get(seq);
    if (record && !isUnreadable(record)) this.#content.set(seq, { ...record, expiresAt: ms });
  }

  /** Seqs whose stored record cannot be decoded (src/store/unreadable.ts). */
  readonly #unreadable = new Set<number>();

  /** The stored records of these seqs cannot be decoded: the store answers the unreadable mark. */
  breakRecords(...seqs: number[]): void {
    for (const s of seqs) {
      this.#content.set(s, unreadableRecord(this.idOf(s)));
      this.#unreadable.add(s);
    }
  }

  /** Entries deleted by hand (XDEL): holes in the stream. */
  readonly holes = new Set<number>();

  /**
   * True when `seq` can rightly be reported as a gap: trimmed, deleted by hand, or its
   * content expired. (Not meaningful across `recreate` or `restoreTo`.)
   */
  isMissing(seq: number): boolean {
    return seq < this.first || this.holes.has(seq) || (seq <= this.latest && (this.#content.get(seq) === null || this.#unreadable.has(seq)));
  }

  /**
   * True when `seq` can rightly be reported as a gap for `reason`: `trimmed` when it is
   * not in the stream (below the first retained, or deleted by hand), `expired` when its
   * content expired (it may have been trimmed since: both are one-way), `undeliverable`
   * when its record cannot be decoded (the machine's only undeliverable gaps: the
   * session makes those of msgs it cannot serialise). (Not meaningful across `recreate`
   * or `restoreTo`.)
   */
  missingFor(seq: number, reason: GapReason): boolean {
    if (reason === 'trimmed') return seq < this.first || this.holes.has(seq);
    if (reason === 'undeliverable') return this.#unreadable.has(seq);
    const record = this.#content.get(seq);
    return reason === 'expired' && (this.#expired.has(seq) || (record != null && !isUnreadable(record) && record.expiresAt <= this.nowMs));
  }

  /** Trimmed by the cap: entries below `first` are gone. */
  trimTo(first: number): void {
    for (let s = this.first; s < first; s++) this.#content.delete(s);
    this.first = first;
  }

  /** A new inbox (FLUSHALL, then an append): new epoch, seqs restart. */
  recreate(epoch: string | null): void {
    this.#content.clear();
    this.#expired.clear();
    this.#generation += 1;
    this.epoch = epoch;
    this.latest = 0;
    this.first = 1;
  }

  /** Redis restored from an older snapshot: the same epoch with less in it. */
  restoreTo(latest: number): void {
    for (let s = latest + 1; s <= this.latest; s++) this.#content.delete(s);
    this.#generation += 1;
    this.latest = latest;
    this.first = Math.min(this.first, latest + 1);
  }

  /**
   * While true, a rotation asked for by a resume claim is refused, as rotate-7.lua does
   * within the cool-down of the last one (epoch-guard.ts RESUME_ROTATION_COOLDOWN_MS).
   */
  coolingDown = false;

  /**
   * `Inbox.rotateEpoch`: a new epoch when it is still `expected` (rotate-7.lua), unless
   * `cause` is `resume` while {@link coolingDown}; the seqs stay. Its lineage goes on
   * from the latest seq, except after a loss the node proved (`delivered`: through 0,
   * as rotate-7.lua); `generation` stands for a rotation made elsewhere that keeps the
   * numbering (append-11.lua's after a raise, `pixiu redis lost-writes`).
   * @param readLatest a `resume` one's: the latest seq the read that showed the claim
   *   found, below which the lineage stays (rotate-7.lua ARGV[5])
   * @returns true when it was refused so (the epoch kept)
   */
  rotateEpoch(expected: string, cause = 'delivered', readLatest?: number): boolean {
    if (this.epoch !== expected) return false;
    if (cause === 'resume' && this.coolingDown) return true;
    // Epochs are never made twice: `expected` rotated again (after Redis lost the first
    // rotation) gets another name.
    const made = `${expected}-rotated`;
    this.epoch = this.#made.has(made) ? `${made}-again` : made;
    this.#made.add(this.epoch);
    // As rotate-7.lua: a proven loss vouches for no seq of the old epoch.
    this.lineage = { epoch: this.epoch, replaced: expected, through: cause === 'delivered' ? 0 : Math.min(this.latest, readLatest ?? this.latest) };
    return false;
  }

  /** The epochs {@link rotateEpoch} made. */
  readonly #made = new Set<string>();

  /** What `Inbox.range` + `MessageStore.getMany` answer, as one snapshot (with the newest entry, `InboxPage.newest`). */
  read(afterSeq: number, limit: number): { page: InboxPage; records: (ReadRecord | null)[] } {
    const entries: InboxEntry[] = [];
    const records: (ReadRecord | null)[] = [];
    for (let s = Math.max(afterSeq + 1, this.first); s <= this.latest && entries.length < limit; s++) {
      if (this.holes.has(s)) continue;
      entries.push({ seq: s, id: this.idOf(s), kind: MsgKind.user });
      records.push(this.#content.get(s) ?? null);
    }
    const first = this.latest >= this.first ? this.first : this.latest + 1;
    // The stream's newest entry, as range-3.lua returns it beside the page.
    let top = this.latest;
    while (top >= this.first && this.holes.has(top)) top--;
    const page: InboxPage = { epoch: this.epoch, firstSeq: first, latestSeq: this.latest, entries };
    return { page: top >= this.first ? { ...page, newest: { seq: top, id: this.idOf(top), kind: MsgKind.user } } : page, records };
  }
}

/** What the driver checks per connection, frame by frame. */
interface Seen {
  welcomed: boolean;
  /** Highest seq covered by a `msg` or `gap`; 0 right after a `reset` (seqs restart); null when not known. */
  high: number | null;
  frames: ServerFrame[];
  /** The MsgIDs of every `msg` sent on it: one marked `redelivered` past `high` (after a `reset`) must be among them. */
  ids: Set<string>;
}

/** Drives a machine by hand: records effects, answers fetches from the fake inbox. */
export class Driver {
  readonly m: UserMachine;
  readonly inbox = new FakeInbox();
  readonly #config: MachineConfig;
  /** The fetch in flight and the snapshot it read (Redis answers as of the read). */
  pending: { effect: FetchEffect; snapshot: ReturnType<FakeInbox['read']> } | undefined;
  fetches: FetchEffect[] = [];
  readonly seen = new Map<string, Seen>();
  readonly timers = new Map<string, number | null>();
  readonly acks: { device: string; seq: number }[] = [];
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
  /** Highest ack cursor written per device and epoch: a write below it moves a cursor backwards. */
  readonly #ackHigh = new Map<string, number>();
  readonly #strict: boolean;
  /** Every connection's byte allowance (effects.ts `ByteRoom`); undefined: none given. */
  readonly #allowance: number | undefined;
  /** The `hold` effects seen (pages cut at the allowance). */
  holds = 0;
  /** Connections held by a cut page and not drained since ({@link drain}): sent no `msg` until then. */
  readonly #held = new Set<string>();

  /**
   * @param strict also check each frame against the inbox as it is now: a `msg` carries
   *   the MsgID of its seq, and a `gap` covers only seqs that are missing
   *   (`FakeInbox.isMissing`; trims and expiries are one-way, so what a fetch read as
   *   missing still is). Only for runs that never recreate or restore the inbox.
   * @param allowance every connection's byte allowance: a page cut at it holds the
   *   connection until a `drain`, which the caller then owes it
   */
  constructor(config: MachineConfig = CONFIG, { strict = false, allowance }: { strict?: boolean; allowance?: number } = {}) {
    this.#config = config;
    this.#strict = strict;
    this.#allowance = allowance;
    this.m = new UserMachine('u1', config);
  }

  /** Records one batch of effects and checks the invariants. */
  take(effects: Effect[]): Effect[] {
    /**
     * Per connection, the sizes of the `msg` frames of this batch and of the `gap`s after
     * its first (one page: a cut connection is paused; a gap before it may be a resume's).
     */
    const sizes = new Map<string, { bytes: number; msg: boolean }[]>();
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
          assert.ok(e.frame.t !== 'msg' || !this.#held.has(e.conn), `${e.conn}: msg ${e.frame.t === 'msg' ? e.frame.seq : ''} sent while held by a cut page, before its drain`);
          this.#check(e.conn, e.frame);
          // As the machine sized it: before the page's first frame was told the epoch.
          if (e.frame.t === 'msg' && this.#allowance !== undefined) {
            (sizes.get(e.conn) ?? sizes.set(e.conn, []).get(e.conn) as { bytes: number; msg: boolean }[]).push({ bytes: msgFrameSize({ ...e.frame, epoch: undefined }), msg: true });
          } else if (e.frame.t === 'gap') {
            sizes.get(e.conn)?.push({ bytes: gapFrameSize({ ...e.frame, epoch: undefined }), msg: false });
          }
          if (e.live === true) {
            assert.ok(e.frame.t === 'msg' && e.frame.redelivered !== true, `${e.conn}: a live mark on ${briefOf(e.frame)}`);
            this.live.push(`${e.conn} ${e.frame.seq}`);
          }
          break;
        case 'timer':
          this.timers.set(e.conn, e.delayMs);
          break;
        case 'ack':
          this.acks.push({ device: e.device, seq: e.seq });
          this.#checkAck(e.device, e.seq, e.epoch);
          break;
        case 'close':
          this.closes.push({ conn: e.conn, code: e.code });
          break;
        case 'hold':
          assert.notEqual(this.#allowance, undefined, `${e.conn}: a page cut with no allowance`);
          assert.equal(this.m.cursor(e.conn)?.paused, true, `${e.conn}: held but not paused`);
          this.holds++;
          this.#held.add(e.conn);
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
    for (const conn of this.seen.keys()) {
      const c = this.m.cursor(conn);
      if (c) assert.ok(c.inflight <= this.#config.window, `${conn} has ${c.inflight} in flight, window ${this.#config.window}`);
    }
    // A page stops at the message whose frames, gaps included, reach the allowance: all
    // but its last message and the gaps before it stay under it. Sized only with an
    // allowance (set above): without one nothing can pass it.
    const allowance = this.#allowance ?? Number.POSITIVE_INFINITY;
    for (const [conn, page] of sizes) {
      let last = page.length - 1;
      while (last > 0 && !(page[last] as { msg: boolean }).msg) last--;
      let before = last - 1;
      while (before >= 0 && !(page[before] as { msg: boolean }).msg) before--;
      const beforeLast = page.slice(0, before + 1).reduce((sum, f) => sum + f.bytes, 0);
      const shown = page.map((f) => `${f.msg ? '' : 'gap '}${f.bytes}`).join('+');
      assert.ok(before < 0 || beforeLast < allowance, `${conn}: a page (${shown} bytes) past its allowance ${allowance} by more than its last msg`);
    }
    return effects;
  }

  #checkAck(device: string, seq: number, epoch: string | undefined): void {
    const key = `${device}\u0000${epoch ?? ''}`;
    const high = this.#ackHigh.get(key) ?? 0;
    assert.ok(seq > high, `ack cursor of ${device} written backwards or again: ${seq} after ${high} (epoch ${epoch})`);
    this.#ackHigh.set(key, seq);
  }

  #check(conn: string, frame: ServerFrame): void {
    if (this.#strict) this.#checkAgainstInbox(conn, frame);
    let s = this.seen.get(conn);
    if (!s) this.seen.set(conn, (s = { welcomed: false, high: null, frames: [], ids: new Set() }));
    s.frames.push(frame);
    if (frame.t === 'error' || frame.t === 'pong') return;
    if (frame.t === 'welcome') {
      assert.equal(s.welcomed, false, `${conn}: a second welcome`);
      s.welcomed = true;
      s.high = frame.resume_from - 1;
      return;
    }
    assert.ok(s.welcomed, `${conn}: ${frame.t} before welcome`);
    if (frame.t === 'reset') {
      // Seqs restart under the new epoch: every one from 1 comes as a `msg` or in a
      // `gap` (trimmed below the first retained), whether the reset is the resume notice
      // right after `welcome` or comes later (docs/protocol.md, `reset`).
      s.high = 0;
    } else if (frame.t === 'gap') {
      assert.ok(frame.from <= frame.to, `${conn}: gap ${frame.from}..${frame.to}`);
      if (s.high !== null) assert.ok(frame.from <= s.high + 1, `${conn}: gap from ${frame.from} skips after ${s.high}`);
      s.high = Math.max(s.high ?? 0, frame.to);
    } else if (frame.t === 'msg') {
      if (frame.redelivered && s.high !== null && frame.seq <= s.high) {
        // A redelivery round's: sent before at this seq.
      } else {
        // After a `reset`, a message sent again as one the connection had (resent-marks.ts)
        // comes in seq order as any other, but marked: it must be one it was sent.
        if (frame.redelivered) assert.ok(s.ids.has(frame.id), `${conn}: seq ${frame.seq} marked redelivered but never sent`);
        if (s.high !== null) assert.equal(frame.seq, s.high + 1, `${conn}: msg ${frame.seq} after ${s.high} (skipped or repeated unmarked)`);
        s.high = frame.seq;
      }
      s.ids.add(frame.id);
    }
  }

  #checkAgainstInbox(conn: string, frame: ServerFrame): void {
    if (frame.t === 'msg') {
      assert.equal(frame.id, this.inbox.idOf(frame.seq), `${conn}: msg ${frame.seq} carries another message's id`);
    } else if (frame.t === 'gap') {
      for (let s = frame.from; s <= frame.to; s++) {
        assert.ok(this.inbox.isMissing(s), `${conn}: gap ${frame.from}-${frame.to} covers seq ${s}, which is in the inbox`);
        assert.ok(this.inbox.missingFor(s, frame.reason), `${conn}: gap ${frame.from}-${frame.to} says ${frame.reason} of seq ${s}, which is not`);
      }
    }
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
    return this.take(this.m.login(conn, device, resume, allowance === undefined ? undefined : { byteAllowance: () => allowance }));
  }

  ack(conn: string, seq: number): Effect[] {
    return this.take(this.m.ack(conn, seq));
  }

  notify(seq?: number): Effect[] {
    return this.take(this.m.notify(seq));
  }

  /** The connection's writes drained (the gateway's drain): a page held on it may go on. */
  drain(conn: string): Effect[] {
    this.#held.delete(conn);
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

export function briefOf(f: ServerFrame): string {
  switch (f.t) {
    case 'msg': return `msg ${f.seq}${f.redelivered ? ' r' : ''}`;
    case 'gap': return `gap ${f.from}-${f.to} ${f.reason}${f.redelivered ? ' r' : ''}`;
    case 'reset': return `reset ${f.epoch} ${f.seq}`;
    case 'welcome': return `welcome ${f.resume_from}`;
    default: return f.t;
  }
}
