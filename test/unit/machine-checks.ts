/**
 * The rules the delivery machine's hand driver (machine-driver.ts) checks on every batch
 * of effects, whatever happens (DESIGN.md §5, §6; docs/protocol.md): `welcome` first on
 * a connection, no seq skipped or repeated unmarked (a `redelivered` one past the
 * connection's high after a `reset` must be one it was sent), never more than the window
 * in flight, and no ack cursor written backwards within an epoch. Given a byte
 * allowance, no connection's page exceeds it by more than its last message, and a
 * connection whose page was cut (a `hold`) is sent no `msg` until the driver drains it.
 * Strict, each frame is also checked against the inbox as it is now ({@link FakeInbox}):
 * a `msg` carries its seq's MsgID, a `gap` covers only seqs missing for its `reason`.
 *
 * The checks keep, per connection, what it was sent ({@link Seen}); the driver reads
 * its frames from there.
 */
import assert from 'node:assert/strict';
import type { Effect, MachineConfig, UserMachine } from '../../src/delivery/machine.js';
import type { ServerFrame } from '../../src/delivery/frames.js';
import { gapFrameSize, msgFrameSize } from '../../src/delivery/msg-frame-bytes.js';
import type { FakeInbox } from './fake-inbox.js';

/** What the checks keep per connection, frame by frame. */
export interface Seen {
  welcomed: boolean;
  /** Highest seq covered by a `msg` or `gap`; 0 right after a `reset` (seqs restart); null when not known. */
  high: number | null;
  /** The frames sent on it, in order (the driver's `frames` takes and forgets them). */
  frames: ServerFrame[];
  /** The MsgIDs of every `msg` sent on it: one marked `redelivered` past `high` (after a `reset`) must be among them. */
  ids: Set<string>;
}

/** A `send` effect of the machine. */
export type SendEffect = Extract<Effect, { kind: 'send' }>;

/** One frame of a batch's page on a connection, as the machine sized it. */
interface Sized {
  bytes: number;
  msg: boolean;
}

/** The checks of one driver's machine; the driver calls them effect by effect, in order. */
export class MachineChecks {
  /** Per connection, what it was sent (created by its first frame). */
  readonly seen = new Map<string, Seen>();
  readonly #machine: UserMachine;
  readonly #inbox: FakeInbox;
  readonly #config: MachineConfig;
  readonly #strict: boolean;
  /** Every connection's byte allowance (effects.ts `ByteRoom`); undefined: none given. */
  readonly #allowance: number | undefined;
  /** Highest ack cursor written per device and epoch: a write below it moves a cursor backwards. */
  readonly #ackHigh = new Map<string, number>();
  /** Connections held by a cut page and not drained since ({@link drained}): sent no `msg` until then. */
  readonly #held = new Set<string>();
  /**
   * Per connection, the sizes of the `msg` frames of this batch and of the `gap`s after
   * its first (one page: a cut connection is paused; a gap before it may be a resume's).
   */
  #sizes = new Map<string, Sized[]>();

  /**
   * @param machine the machine driven, asked for its cursors
   * @param inbox the inbox it reads, the oracle of the strict checks
   * @param config the machine's config (its `window`)
   * @param strict also check each frame against the inbox as it is now (see the
   *   driver's constructor)
   * @param allowance every connection's byte allowance; undefined: none given
   */
  constructor(machine: UserMachine, inbox: FakeInbox, config: MachineConfig, strict: boolean, allowance: number | undefined) {
    this.#machine = machine;
    this.#inbox = inbox;
    this.#config = config;
    this.#strict = strict;
    this.#allowance = allowance;
  }

  /** A new batch of effects begins: its pages are sized afresh. */
  beginBatch(): void {
    this.#sizes = new Map();
  }

  /** Checks a `send`: its connection not held for a `msg`, the frame in order, a `live` mark only on a first send of a `msg`. */
  sent(e: SendEffect): void {
    assert.ok(e.frame.t !== 'msg' || !this.#held.has(e.conn), `${e.conn}: msg ${e.frame.t === 'msg' ? e.frame.seq : ''} sent while held by a cut page, before its drain`);
    this.#check(e.conn, e.frame);
    // As the machine sized it: before the page's first frame was told the epoch.
    if (e.frame.t === 'msg' && this.#allowance !== undefined) {
      (this.#sizes.get(e.conn) ?? this.#sizes.set(e.conn, []).get(e.conn) as Sized[]).push({ bytes: msgFrameSize({ ...e.frame, epoch: undefined }), msg: true });
    } else if (e.frame.t === 'gap') {
      this.#sizes.get(e.conn)?.push({ bytes: gapFrameSize({ ...e.frame, epoch: undefined }), msg: false });
    }
    if (e.live === true) {
      assert.ok(e.frame.t === 'msg' && e.frame.redelivered !== true, `${e.conn}: a live mark on ${briefOf(e.frame)}`);
    }
  }

  /** Checks an `ack` cursor write: above the last one of its device in its epoch. */
  acked(device: string, seq: number, epoch: string | undefined): void {
    const key = `${device}\u0000${epoch ?? ''}`;
    const high = this.#ackHigh.get(key) ?? 0;
    assert.ok(seq > high, `ack cursor of ${device} written backwards or again: ${seq} after ${high} (epoch ${epoch})`);
    this.#ackHigh.set(key, seq);
  }

  /** Checks a `hold` (a page cut at the allowance): an allowance was given and the connection is paused; it is held until {@link drained}. */
  held(conn: string): void {
    assert.notEqual(this.#allowance, undefined, `${conn}: a page cut with no allowance`);
    assert.equal(this.#machine.cursor(conn)?.paused, true, `${conn}: held but not paused`);
    this.#held.add(conn);
  }

  /** The connection's writes drained: a page held on it may go on. */
  drained(conn: string): void {
    this.#held.delete(conn);
  }

  /** Checks the batch as a whole: every connection within its window, every page within its allowance. */
  endBatch(): void {
    for (const conn of this.seen.keys()) {
      const c = this.#machine.cursor(conn);
      if (c) assert.ok(c.inflight <= this.#config.window, `${conn} has ${c.inflight} in flight, window ${this.#config.window}`);
    }
    // A page stops at the message whose frames, gaps included, reach the allowance: all
    // but its last message and the gaps before it stay under it. Sized only with an
    // allowance (in `sent`): without one nothing can pass it.
    const allowance = this.#allowance ?? Number.POSITIVE_INFINITY;
    for (const [conn, page] of this.#sizes) {
      let last = page.length - 1;
      while (last > 0 && !(page[last] as Sized).msg) last--;
      let before = last - 1;
      while (before >= 0 && !(page[before] as Sized).msg) before--;
      const beforeLast = page.slice(0, before + 1).reduce((sum, f) => sum + f.bytes, 0);
      const shown = page.map((f) => `${f.msg ? '' : 'gap '}${f.bytes}`).join('+');
      assert.ok(before < 0 || beforeLast < allowance, `${conn}: a page (${shown} bytes) past its allowance ${allowance} by more than its last msg`);
    }
  }

  /** Records `frame` on `conn` and checks it follows what the connection was sent. */
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

  /** Strict: a `msg` carries its seq's MsgID; a `gap` covers only seqs missing, each for its reason. */
  #checkAgainstInbox(conn: string, frame: ServerFrame): void {
    if (frame.t === 'msg') {
      assert.equal(frame.id, this.#inbox.idOf(frame.seq), `${conn}: msg ${frame.seq} carries another message's id`);
    } else if (frame.t === 'gap') {
      for (let s = frame.from; s <= frame.to; s++) {
        assert.ok(this.#inbox.isMissing(s), `${conn}: gap ${frame.from}-${frame.to} covers seq ${s}, which is in the inbox`);
        assert.ok(this.#inbox.missingFor(s, frame.reason), `${conn}: gap ${frame.from}-${frame.to} says ${frame.reason} of seq ${s}, which is not`);
      }
    }
  }
}

/** A frame in a compact form: `msg 3`, `msg 3 r`, `gap 4-6 trimmed`, `gap 2-2 expired r`, `reset ep1 10`, `welcome 4`, else its type. */
export function briefOf(f: ServerFrame): string {
  switch (f.t) {
    case 'msg': return `msg ${f.seq}${f.redelivered ? ' r' : ''}`;
    case 'gap': return `gap ${f.from}-${f.to} ${f.reason}${f.redelivered ? ' r' : ''}`;
    case 'reset': return `reset ${f.epoch} ${f.seq}`;
    case 'welcome': return `welcome ${f.resume_from}`;
    default: return f.t;
  }
}
