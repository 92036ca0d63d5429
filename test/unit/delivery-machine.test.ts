/**
 * The per-user delivery state machine (src/delivery/machine.ts, DESIGN.md §5, §6, §11),
 * driven by hand with no I/O. A small in-memory inbox answers each `fetch` effect with
 * the page Redis would give (a double of data, not of the network); a driver records
 * every effect and checks, on every batch, the rules that must hold whatever happens:
 * at most one fetch in flight, `welcome` first, no seq skipped or repeated unmarked on
 * a connection, never more than the window in flight.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { InboxEntry } from '../../src/inbox/inbox.js';
import type { StoredMessage } from '../../src/store/record.js';
import { CloseCode } from '../../src/delivery/close-codes.js';
import type { Effect, MachineConfig, ResumeRequest } from '../../src/delivery/machine.js';
import type { GapFrame, MsgFrame, ServerFrame } from '../../src/delivery/frames.js';
import { CONFIG, Driver, FIRST, briefOf } from './machine-driver.js';

const LATEST: ResumeRequest = { kind: 'latest' };
const after = (seq: number, epoch?: string): ResumeRequest => (epoch === undefined ? { kind: 'after', seq } : { kind: 'after', seq, epoch });

/** A driver whose connection `a` logged in to an inbox of `n` messages and got what its window allows. */
function loggedIn(n: number, config: MachineConfig = CONFIG): Driver {
  const d = new Driver(config);
  d.inbox.append(n);
  d.login('a');
  d.settle();
  return d;
}

/** A driver whose connection `a` got and acked all `n` messages of the inbox (n ≤ window); its frames so far are forgotten. */
function caughtUp(n: number, config: MachineConfig = CONFIG): Driver {
  const d = loggedIn(n, config);
  d.ack('a', n);
  d.settle();
  d.frames('a');
  return d;
}

const fetchesIn = (effects: Effect[]): Effect[] => effects.filter((e) => e.kind === 'fetch');
const msgs = (n: number, from = 1): string[] => Array.from({ length: n }, (_, i) => `msg ${from + i}`);

// ---------------------------------------------------------------- one fetch per user

test('events during a fetch start no second fetch; they cause exactly one more after it', () => {
  const d = new Driver({ ...CONFIG, window: 100 });
  d.inbox.append(3);
  d.login('a');
  assert.equal(d.fetches.length, 1);
  d.inbox.append(2);
  // Each of these would want a fetch; the driver fails the test if one starts now.
  for (const effects of [d.notify(4), d.notify(5), d.heartbeat(), d.notify(), d.login('b')]) {
    assert.deepEqual(fetchesIn(effects), []);
  }
  d.answer();
  assert.deepEqual(d.brief('a'), ['welcome 1', ...msgs(3)]);
  assert.ok(d.pending, 'the dirty machine fetches again');
  d.answer();
  assert.deepEqual(d.brief('a'), ['msg 4', 'msg 5']);
  assert.deepEqual(d.brief('b'), ['welcome 1', ...msgs(5)]);
  assert.equal(d.pending, undefined, 'one more fetch, not two');
  assert.equal(d.fetches.length, 2);
});

test('connections at the same cursor share one fetch', () => {
  const d = new Driver({ ...CONFIG, window: 100 });
  d.inbox.append(2);
  d.login('a');
  d.login('b');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'msg 2']);
  assert.deepEqual(d.brief('b'), ['welcome 1', 'msg 1', 'msg 2']);
  assert.equal(d.fetches.length, 1);
  d.inbox.append();
  d.notify(3);
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 3']);
  assert.deepEqual(d.brief('b'), ['msg 3']);
  assert.equal(d.fetches.length, 2);
  assert.deepEqual(d.fetches[1], { kind: 'fetch', afterSeq: 2, limit: 100 });
});

test('a connection behind is served from what was read for another, with no new fetch', () => {
  const d = new Driver({ ...CONFIG, window: 10 });
  d.inbox.append(2);
  d.login('a');
  d.login('b');
  d.settle();
  d.take(d.m.pause('a'));
  d.inbox.append(2);
  d.notify(4);
  d.settle();
  d.frames('a');
  assert.deepEqual(d.brief('b').slice(-2), ['msg 3', 'msg 4']);
  d.inbox.append(); // seq 5, not notified yet
  const before = d.fetches.length;
  d.take(d.m.drain('a'));
  assert.equal(d.pending, undefined, 'seqs 3 and 4 were read for b: no fetch');
  assert.deepEqual(d.brief('a'), ['msg 3', 'msg 4']);
  d.notify(5);
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 5']);
  assert.deepEqual(d.brief('b'), ['msg 5'], 'both at 4: one fetch');
  assert.equal(d.fetches.length, before + 1);
});

test('one page serves every connection it covers, whatever its cursor', () => {
  const d = new Driver({ ...CONFIG, window: 10 });
  d.inbox.append(2);
  d.login('a');
  d.login('b');
  d.settle();
  d.take(d.m.pause('a'));
  d.inbox.append(2);
  d.notify(4);
  d.settle();
  d.frames('a');
  assert.deepEqual(d.brief('b').slice(-2), ['msg 3', 'msg 4']);
  d.inbox.append(); // seq 5, not notified yet
  d.heartbeat(); // drops what was read ahead; b pulls after 4
  d.take(d.m.drain('a')); // a, at 2, waits for that fetch
  const before = d.fetches.length;
  d.answer();
  assert.deepEqual(d.brief('b'), ['msg 5']);
  d.answer(); // after 2, for a: it covers b's cursor too, which has nothing more
  assert.deepEqual(d.brief('a'), ['msg 3', 'msg 4', 'msg 5']);
  assert.equal(d.pending, undefined);
  assert.equal(d.fetches.length, before + 1);
});

test('a fetch that brings nothing new does not fetch again', () => {
  const d = loggedIn(2);
  d.ack('a', 2);
  d.settle();
  const before = d.fetches.length;
  d.heartbeat();
  assert.equal(d.fetches.length, before + 1, 'a heartbeat pulls');
  d.answer();
  assert.equal(d.pending, undefined);
  d.notify();
  d.answer();
  assert.equal(d.pending, undefined);
  assert.deepEqual(d.brief('a').slice(3), []);
});

test('a notify with a newer seq during a fetch is not lost', () => {
  const d = loggedIn(2, { ...CONFIG, window: 100 });
  d.frames('a');
  d.heartbeat(); // a fetch in flight that read the inbox at latest 2
  d.inbox.append();
  d.notify(3);
  d.answer(); // nothing new in that snapshot
  assert.ok(d.pending, 'the notify made the machine fetch again');
  d.answer();
  assert.deepEqual(d.brief('a'), ['msg 3']);
  assert.equal(d.pending, undefined);
});

// ---------------------------------------------------------------- login and resume

test('login: welcome first with its fields, then messages in seq order', () => {
  const d = new Driver({ ...CONFIG, window: 10 });
  d.inbox.append(4);
  d.login('c1', FIRST, 'phone');
  d.settle();
  const frames = d.frames('c1');
  assert.deepEqual(frames[0], { t: 'welcome', conn: 'c1', user: 'u1', device: 'phone', epoch: 'ep1', seq: 4, resume_from: 1, heartbeat: 25 });
  const first = frames[1] as MsgFrame;
  assert.deepEqual(first, { t: 'msg', seq: 1, id: d.inbox.idOf(1), type: 'chat', ts: 1_001, data: { n: 1 } });
  assert.deepEqual(frames.slice(1).map(briefOf), msgs(4));
});

test('resume: no last_seq and no cursor starts at the first retained entry, with no gap', () => {
  const d = new Driver();
  d.inbox.append(10);
  d.inbox.trimTo(6);
  d.login('a', FIRST);
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 6', ...msgs(3, 6)]);
});

test('resume: last_seq within the retained range starts after it', () => {
  for (const resume of [after(4), after(4, 'ep1')]) {
    const d = new Driver();
    d.inbox.append(10);
    d.inbox.trimTo(3);
    d.login('a', resume);
    d.settle();
    assert.deepEqual(d.brief('a'), ['welcome 5', ...msgs(3, 5)]);
  }
  const edge = new Driver();
  edge.inbox.append(10);
  edge.inbox.trimTo(6);
  edge.login('a', after(5)); // first retained − 1: nothing is missing
  edge.settle();
  assert.deepEqual(edge.brief('a'), ['welcome 6', ...msgs(3, 6)]);
});

test('resume: last_seq below the first retained − 1 sends gap {last_seq+1, first−1}, then from first', () => {
  const d = new Driver();
  d.inbox.append(25);
  d.inbox.trimTo(16);
  d.login('a', after(0, 'ep1'));
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 16', 'gap 1-15 trimmed', ...msgs(3, 16)]);
});

test('resume: another epoch, or last_seq above latest, sends reset {epoch, seq}, a trimmed gap of the seqs below the first retained, then from the first retained', () => {
  for (const resume of [after(3, 'old-epoch'), after(11)]) {
    const d = new Driver();
    d.inbox.append(10);
    d.inbox.trimTo(4);
    d.login('a', resume);
    d.settle();
    const frames = d.frames('a');
    assert.deepEqual(frames[1], { t: 'reset', epoch: 'ep1', seq: 10 }, JSON.stringify(resume));
    assert.deepEqual(frames.map(briefOf), ['welcome 4', 'reset ep1 10', 'gap 1-3 trimmed', ...msgs(3, 4)]);
  }
});

test('a reset of an inbox that still starts at seq 1 sends no gap: the retained messages follow it from 1', () => {
  const d = new Driver();
  d.inbox.append(3);
  d.login('a', after(2, 'old-epoch'));
  d.settle();
  assert.deepEqual(d.frames('a').map(briefOf), ['welcome 1', 'reset ep1 3', ...msgs(3, 1)]);
});

test('resume: last_seq above latest under the inbox\'s own epoch (it came back with less) asks for a new epoch, then resets under it', () => {
  const d = new Driver();
  d.inbox.append(10);
  d.inbox.trimTo(4);
  d.login('a', after(11, 'ep1'));
  d.settle();
  assert.deepEqual(d.rotations, ['ep1']);
  assert.deepEqual(d.rotationCauses, ['resume'], 'the log can say a client\'s last_seq showed it, not this node\'s deliveries');
  const frames = d.frames('a');
  assert.deepEqual(frames[1], { t: 'reset', epoch: 'ep1-rotated', seq: 10 });
  // The new epoch goes on from ep1 through 10, and the device had up to 11 of it: no news (reset-gap-marks.test.ts).
  assert.deepEqual(frames.map(briefOf), ['welcome 4', 'reset ep1-rotated 10', 'gap 1-3 trimmed r', ...msgs(3, 4)]);
});

test('resume: from=latest sends nothing old, then what is appended', () => {
  const d = new Driver();
  d.inbox.append(5);
  d.login('a', LATEST);
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 6']);
  // Nothing old is wanted: the join's fetch reads only the inbox's bounds, no page of entries.
  assert.deepEqual(d.fetches.map((f) => f.afterSeq), [Number.MAX_SAFE_INTEGER]);
  d.inbox.append();
  d.notify(6);
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 6']);
});

test('a user with no inbox yet: welcome with epoch null, then the first message without a reset', () => {
  const d = new Driver();
  d.inbox.recreate(null);
  d.login('a');
  d.settle();
  assert.deepEqual(d.frames('a'), [{ t: 'welcome', conn: 'a', user: 'u1', device: 'dev-a', epoch: null, seq: 0, resume_from: 1, heartbeat: 25 }]);
  d.inbox.epoch = 'ep1';
  d.inbox.append();
  d.notify(1);
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 1']);
});

// ---------------------------------------------------------------- window

test('window: exactly W in flight, nothing more until an ack, then more', () => {
  const d = loggedIn(10);
  assert.deepEqual(d.brief('a'), ['welcome 1', ...msgs(3)]);
  const fetches = d.fetches.length;
  d.notify(10);
  d.heartbeat();
  d.settle();
  // A pull still reads for a full window, one entry, to see the epoch (a reset must not
  // wait for an ack); it sends nothing.
  const probes = d.fetches.slice(fetches).map((f) => [f.afterSeq, f.limit]);
  assert.ok(probes.length >= 1 && probes.length <= 2 && probes.every(([after, limit]) => after === 3 && limit === 1), JSON.stringify(probes));
  assert.deepEqual(d.brief('a'), []);
  d.ack('a', 2);
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 4', 'msg 5']);
  assert.equal(d.m.cursor('a')?.inflight, 3);
  d.ack('a', 5);
  d.settle();
  assert.deepEqual(d.brief('a'), msgs(3, 6));
});

test('a full window is reset by a pull: a new epoch is not held back until an ack or a redelivery round', () => {
  const d = loggedIn(10);
  assert.deepEqual(d.brief('a'), ['welcome 1', ...msgs(3)]);
  d.inbox.recreate('ep2');
  d.inbox.append(1);
  d.heartbeat();
  d.settle();
  const frames = d.brief('a');
  assert.equal(frames[0]?.startsWith('reset'), true, frames.join(', '));
  assert.deepEqual(frames.slice(1), msgs(1));
});

test('gaps do not consume the window', () => {
  const d = new Driver();
  d.inbox.append(8);
  d.inbox.expire(2, 3);
  d.login('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'gap 2-3 expired', 'msg 4', 'msg 5']);
  assert.equal(d.m.cursor('a')?.inflight, 3);
});

// ---------------------------------------------------------------- acks

test('acks are cumulative and persisted with the device; at or below the cursor they change nothing', () => {
  const d = new Driver();
  d.inbox.append(3);
  d.login('a', FIRST, 'phone');
  d.settle();
  const effects = d.ack('a', 3);
  assert.deepEqual(effects.filter((e) => e.kind === 'ack'), [{ kind: 'ack', device: 'phone', seq: 3, epoch: 'ep1' }]);
  assert.deepEqual(d.m.cursor('a'), { acked: 3, sent: 3, inflight: 0, paused: false });
  assert.equal(d.timers.get('a'), null, 'nothing in flight: the redelivery timer is cancelled');
  assert.deepEqual(d.ack('a', 3), []);
  assert.deepEqual(d.ack('a', 1), []);
  assert.deepEqual(d.ack('a', 0), []);
  assert.deepEqual(d.acks, [{ device: 'phone', seq: 3 }]);
});

test('an ack of the seq a connection started at (from=latest, last_seq) is stored for the device, once; the cursor stays', () => {
  const d = new Driver();
  d.inbox.append(5);
  d.login('a', LATEST, 'phone');
  d.settle();
  // The start (5) is the connection's cursor but was never the device's: its ack is stored.
  assert.deepEqual(d.ack('a', 5), [{ kind: 'ack', device: 'phone', seq: 5, epoch: 'ep1' }]);
  assert.deepEqual(d.m.cursor('a'), { acked: 5, sent: 5, inflight: 0, paused: false });
  assert.deepEqual(d.ack('a', 5), [], 'stored already');
  assert.deepEqual(d.ack('a', 4), [], 'below what was stored');
  d.login('b', after(4), 'tablet');
  d.settle();
  assert.deepEqual(d.ack('b', 2).filter((e) => e.kind === 'ack'), [{ kind: 'ack', device: 'tablet', seq: 2, epoch: 'ep1' }]);
  assert.deepEqual(d.ack('b', 4).filter((e) => e.kind === 'ack'), [{ kind: 'ack', device: 'tablet', seq: 4, epoch: 'ep1' }]);
  assert.deepEqual(d.m.cursor('b'), { acked: 4, sent: 5, inflight: 1, paused: false }, 'msg 5 still in flight');
  assert.deepEqual(d.acks, [{ device: 'phone', seq: 5 }, { device: 'tablet', seq: 2 }, { device: 'tablet', seq: 4 }]);
});

test('after a reset, an ack of the new inbox\'s seqs is stored even below what the old inbox had stored', () => {
  const d = new Driver();
  d.inbox.append(5);
  d.login('a', LATEST, 'phone');
  d.settle();
  d.ack('a', 5);
  d.inbox.append();
  d.notify(6);
  d.settle();
  d.ack('a', 6);
  d.frames('a');
  d.inbox.recreate('ep2');
  d.inbox.append(2);
  d.notify(2);
  d.settle();
  assert.deepEqual(d.brief('a'), ['reset ep2 2', 'msg 1', 'msg 2']);
  assert.deepEqual(d.ack('a', 2).filter((e) => e.kind === 'ack'), [{ kind: 'ack', device: 'phone', seq: 2, epoch: 'ep2' }]);
  assert.deepEqual(d.acks, [{ device: 'phone', seq: 5 }, { device: 'phone', seq: 6 }, { device: 'phone', seq: 2 }]);
});

test('an ack above the last seq sent is an error frame and moves nothing', () => {
  const d = loggedIn(5);
  d.frames('a');
  const effects = d.ack('a', 4);
  assert.equal(effects.length, 1);
  const frame = d.frames('a')[0];
  assert.equal(frame?.t, 'error');
  assert.equal(frame.t === 'error' && frame.code, 'INVALID_REQUEST');
  assert.deepEqual(frame.t === 'error' && frame.ref, { t: 'ack', seq: 4 });
  assert.deepEqual(d.m.cursor('a'), { acked: 0, sent: 3, inflight: 3, paused: false });
  assert.deepEqual(d.acks, []);
});

test('an ack before welcome is an error frame', () => {
  const d = new Driver();
  d.inbox.append(1);
  d.login('a');
  const effects = d.ack('a', 0);
  assert.deepEqual(effects.map((e) => e.kind), ['send']);
  assert.equal(d.frames('a')[0]?.t, 'error');
});

test('two devices of one user have independent cursors', () => {
  const d = new Driver();
  d.inbox.append(6);
  d.login('a', FIRST, 'phone');
  d.login('b', FIRST, 'laptop');
  d.settle();
  d.ack('a', 3);
  d.settle();
  assert.deepEqual(d.acks, [{ device: 'phone', seq: 3 }]);
  assert.deepEqual(d.m.cursor('a'), { acked: 3, sent: 6, inflight: 3, paused: false });
  assert.deepEqual(d.m.cursor('b'), { acked: 0, sent: 3, inflight: 3, paused: false });
  assert.deepEqual(d.brief('b'), ['welcome 1', ...msgs(3)]);
  d.due('b'); // laptop never acked: its own redelivery, phone's cursor untouched
  d.settle();
  assert.deepEqual(d.brief('b'), ['msg 1 r', 'msg 2 r', 'msg 3 r']);
  assert.deepEqual(d.m.cursor('a'), { acked: 3, sent: 6, inflight: 3, paused: false });
  d.ack('b', 1);
  assert.deepEqual(d.acks, [{ device: 'phone', seq: 3 }, { device: 'laptop', seq: 1 }]);
});

// ---------------------------------------------------------------- redelivery

test('redelivery: timer armed when something goes in flight, resent from acked+1 marked, back-off, then 4008', () => {
  const d = loggedIn(3);
  assert.equal(d.timers.get('a'), 10_000);
  d.ack('a', 1);
  assert.equal(d.timers.get('a'), 10_000, 'ack progress re-arms the ack timeout');
  d.frames('a');
  for (const wait of [2_000, 4_000, 6_000]) {
    d.due('a');
    d.settle();
    assert.equal(d.timers.get('a'), wait);
    assert.deepEqual(d.brief('a'), ['msg 2 r', 'msg 3 r']);
    assert.deepEqual(d.closes, []);
  }
  const last = d.due('a');
  assert.deepEqual(last, [{ kind: 'close', conn: 'a', code: CloseCode.ackTimeout, reason: 'ack timeout' }]);
});

test('redelivery: a round whose only resend could not be serialised ends the round; the next message gets the whole schedule again', () => {
  // session.ts sends an unserialisable `msg` as a `gap` and calls `undeliverable`: the
  // window is empty, the round over. Left counted and armed, the next message would
  // inherit the old round's timer and count, and be closed 4008 early.
  const d = loggedIn(1);
  d.frames('a');
  d.due('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 1 r']);
  d.take(d.m.undeliverable('a', 1));
  assert.equal(d.timers.get('a'), null, 'nothing awaits an ack: the timer stops');
  d.inbox.append();
  d.notify(2);
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 2']);
  assert.equal(d.timers.get('a'), CONFIG.ackTimeoutMs, 'a new round: the ack timeout, not the old back-off');
  for (const wait of CONFIG.backoffMs) {
    d.due('a');
    d.settle();
    assert.equal(d.timers.get('a'), wait);
    assert.deepEqual(d.closes, []);
  }
  d.due('a');
  assert.deepEqual(d.closes, [{ conn: 'a', code: CloseCode.ackTimeout }]);
});

test('redelivery: an unserialisable resend while the rest of the round is still to be read keeps the round and its timer', () => {
  // Pages of one entry: the round's resend of 1..2 takes two reads. Msg 1's resend goes
  // out as a gap (undeliverable); msg 2's read fails. The round is not over: its timer
  // must stay, or nothing resends msg 2 until a heartbeat, and the rounds start over.
  const d = new Driver({ ...CONFIG, pageMax: 1 });
  d.inbox.append(2);
  d.login('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'msg 2']);
  d.due('a');
  d.answer();
  assert.deepEqual(d.brief('a'), ['msg 1 r']);
  d.take(d.m.undeliverable('a', 1));
  assert.equal(d.timers.get('a'), CONFIG.backoffMs[0], 'the round goes on: its timer is kept');
  d.fail();
  d.due('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 2 r'], 'the timer resends what the failed read did not');
});

test('redelivery: only what was sent before is marked; what follows is new', () => {
  const d = loggedIn(2);
  d.inbox.append(3);
  d.frames('a');
  d.due('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 1 r', 'msg 2 r', 'msg 3']);
});

test('redelivery: an ack between rounds resets the rounds', () => {
  const d = loggedIn(5);
  d.due('a');
  d.settle();
  d.due('a');
  d.settle();
  assert.equal(d.timers.get('a'), 4_000);
  d.ack('a', 1);
  d.settle();
  assert.equal(d.timers.get('a'), 10_000);
  for (const wait of [2_000, 4_000, 6_000]) {
    d.due('a');
    d.settle();
    assert.equal(d.timers.get('a'), wait);
  }
  assert.deepEqual(d.closes, []);
  d.due('a');
  assert.deepEqual(d.closes, [{ conn: 'a', code: 4008 }]);
});

test('redelivery: an ack of a seq sent before the round, arriving while the resend is fetched, is accepted', () => {
  const d = new Driver();
  d.inbox.append(5);
  d.login('a', FIRST, 'phone');
  d.settle();
  d.due('a'); // rewinds; the resend's fetch is in flight
  assert.ok(d.pending);
  d.frames('a');
  const effects = d.ack('a', 3);
  assert.deepEqual(d.frames('a').filter((f) => f.t === 'error'), [], 'seq 3 was sent: acking it is no error');
  assert.deepEqual(effects.filter((e) => e.kind === 'ack'), [{ kind: 'ack', device: 'phone', seq: 3, epoch: 'ep1' }]);
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 4', 'msg 5']);
  assert.equal(d.m.cursor('a')?.acked, 3);
});

test('redelivery: a round whose resend could not go out keeps the timer (no silent stall)', () => {
  const d = loggedIn(3);
  d.due('a');
  d.fail(); // the resend's fetch failed
  d.due('a'); // the round's wait passed
  assert.notEqual(d.timers.get('a'), null, 'a redelivery timer is still armed');
  d.heartbeat(); // the driver's retry
  d.settle();
  assert.deepEqual(d.brief('a').slice(-3), ['msg 1 r', 'msg 2 r', 'msg 3 r']);
  for (let i = 0; i < 5 && d.closes.length === 0; i++) {
    d.due('a');
    d.settle();
  }
  assert.deepEqual(d.closes, [{ conn: 'a', code: 4008 }], 'unanswered rounds still end in 4008');
});

// ---------------------------------------------------------------- gaps, trimming

/** The frames a connection logging in gets from an inbox of `n` messages, some deleted by hand (`holes`) or `expired`; window 10. */
function framesOver(n: number, { holes = [], expired = [] }: { holes?: number[]; expired?: number[] }): ServerFrame[] {
  const d = new Driver({ ...CONFIG, window: 10 });
  d.inbox.append(n);
  for (const seq of holes) d.inbox.holes.add(seq);
  d.inbox.expire(...expired);
  d.login('a');
  d.settle();
  return d.frames('a');
}

test('expired content is a gap of its seq (consecutive ones merged) and delivery continues after it', () => {
  const frames = framesOver(7, { expired: [2, 3, 5] });
  assert.deepEqual(frames.map(briefOf), ['welcome 1', 'msg 1', 'gap 2-3 expired', 'msg 4', 'gap 5-5 expired', 'msg 6', 'msg 7']);
  assert.deepEqual(frames[2] as GapFrame, { t: 'gap', from: 2, to: 3, reason: 'expired' });
});

test('adjacent runs missing for different reasons are separate gaps, in seq order: trimmed, then expired, then trimmed', () => {
  // 2, 3 deleted by hand (XDEL); 4, 5 expired; 6 deleted by hand; 7 expired.
  const frames = framesOver(8, { holes: [2, 3, 6], expired: [4, 5, 7] });
  assert.deepEqual(frames.map(briefOf), ['welcome 1', 'msg 1', 'gap 2-3 trimmed', 'gap 4-5 expired', 'gap 6-6 trimmed', 'gap 7-7 expired', 'msg 8']);
  assert.deepEqual(frames[2] as GapFrame, { t: 'gap', from: 2, to: 3, reason: 'trimmed' });
  assert.deepEqual(frames[3] as GapFrame, { t: 'gap', from: 4, to: 5, reason: 'expired' });
});

test('a record that cannot be decoded is an undeliverable gap of its seq (consecutive ones merged), apart from expired ones, and delivery continues after it', () => {
  const d = new Driver({ ...CONFIG, window: 10 });
  d.inbox.append(8);
  d.inbox.breakRecords(2, 3, 6);
  d.inbox.expire(5);
  d.login('a');
  d.settle();
  const frames = d.frames('a');
  assert.deepEqual(frames.map(briefOf), ['welcome 1', 'msg 1', 'gap 2-3 undeliverable', 'msg 4', 'gap 5-5 expired', 'gap 6-6 undeliverable', 'msg 7', 'msg 8']);
  assert.deepEqual(frames[2] as GapFrame, { t: 'gap', from: 2, to: 3, reason: 'undeliverable' });
});

test('trimmed below a page, then expired at its start: two gaps, the trimmed one first', () => {
  const d = caughtUp(3);
  d.inbox.append(6);
  d.inbox.trimTo(7);
  d.inbox.expire(7, 8);
  d.heartbeat();
  d.settle();
  assert.deepEqual(d.brief('a'), ['gap 4-6 trimmed', 'gap 7-8 expired', 'msg 9']);
});

test('pages of nothing but expired content never stall delivery', () => {
  const d = new Driver({ ...CONFIG, window: 2 });
  d.inbox.append(9);
  d.inbox.expire(1, 2, 3, 4, 5, 6, 7, 8);
  d.login('a');
  d.settle();
  const frames = d.brief('a');
  assert.equal(frames.at(-1), 'msg 9');
  assert.ok(frames.every((f) => f.startsWith('welcome') || f.startsWith('gap') || f === 'msg 9'));
  assert.equal(d.m.cursor('a')?.sent, 9);
});

test('trimmed while connected: a gap for what was trimmed, then the rest', () => {
  const d = caughtUp(3);
  d.inbox.append(9);
  d.inbox.trimTo(9);
  d.notify(12);
  d.settle();
  assert.deepEqual(d.brief('a'), ['gap 4-8 trimmed', 'msg 9', 'msg 10', 'msg 11']);
});

test('trimmed before a redelivery round: the gap of seqs sent before is marked redelivered, the rest is not', () => {
  const d = new Driver({ ...CONFIG, window: 5 });
  d.inbox.append(5);
  d.login('a');
  d.settle();
  d.frames('a');
  // Nothing acked; 3 more appended and the cap trims 1..7 before the round.
  d.inbox.append(3);
  d.inbox.trimTo(8);
  d.due('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['gap 1-5 trimmed r', 'gap 6-7 trimmed', 'msg 8']);
});

// ---------------------------------------------------------------- reset while connected

test('a page with another epoch resets each connection; cursors restart and later messages arrive', () => {
  const d = new Driver();
  d.inbox.append(3);
  d.login('a');
  d.login('b');
  d.settle();
  d.ack('a', 3);
  d.settle();
  d.frames('a');
  d.frames('b');
  d.inbox.recreate('ep2');
  d.inbox.append();
  d.notify(1);
  d.settle();
  assert.deepEqual(d.brief('a'), ['reset ep2 1', 'msg 1']);
  assert.deepEqual(d.brief('b'), ['reset ep2 1', 'msg 1']);
  assert.deepEqual(d.m.cursor('a'), { acked: 0, sent: 1, inflight: 1, paused: false });
  d.ack('a', 1);
  d.inbox.append(2);
  d.notify(3);
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 2', 'msg 3']);
});

test('a page with another epoch resets even when the new inbox is already past what was sent', () => {
  const d = caughtUp(2, { ...CONFIG, window: 10 });
  d.inbox.recreate('ep2');
  d.inbox.append(5);
  d.notify(5);
  d.settle();
  assert.deepEqual(d.brief('a'), ['reset ep2 5', ...msgs(5)]);
});

test('Redis restored with less (same epoch, latest below what was sent): a new epoch, then the connection is reset under it', () => {
  const d = caughtUp(5, { ...CONFIG, window: 10 });
  d.inbox.restoreTo(2);
  d.heartbeat();
  d.settle();
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 2', 'msg 1', 'msg 2']);
  assert.deepEqual(d.rotations, ['ep1'], 'the epoch of the shrunken inbox is replaced, once');
  assert.deepEqual(d.rotationCauses, ['delivered']);
  d.inbox.append(2);
  d.notify(4);
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 3', 'msg 4']);
});

test('Redis restored with less: notifies of seqs at or below the old latest pull, so new messages are not skipped', () => {
  const d = caughtUp(5, { ...CONFIG, window: 10 });
  d.inbox.restoreTo(2);
  d.inbox.append(); // seq 3 again, a different message
  d.notify(3);
  d.settle();
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 3', ...msgs(3)]);
});

test('a restore below what a connection was sent is seen even while its redelivery has rewound it', () => {
  const d = loggedIn(5, { ...CONFIG, window: 10 });
  d.ack('a', 1);
  d.frames('a');
  d.inbox.restoreTo(3);
  d.due('a'); // cursor back at 1; its resend fetch reads the restored inbox
  d.settle();
  const frames = d.brief('a');
  assert.equal(frames[0], 'reset ep1-rotated 3', `seqs 4 and 5 were sent; latest 3 is a reset under a new epoch, got ${frames.join(', ')}`);
});

test('Redis restored with less: no fetch and no direct delivery while the new epoch is being set; every connection, and one joining, is reset under it', () => {
  const d = caughtUp(5, { ...CONFIG, window: 10 });
  // b is behind the restored latest (a resume after 1): nothing of its own was lost, but
  // the seqs above the latest will name other messages for everyone.
  d.login('b', { kind: 'after', seq: 1, epoch: 'ep1' });
  d.settle();
  d.frames('b');
  d.inbox.restoreTo(3);
  d.heartbeat();
  d.answer();
  assert.equal(d.rotating, true, 'latest 3 is below what a was sent: a new epoch is asked for');
  assert.deepEqual(d.rotations, ['ep1']);
  // While it is set: no fetch starts, and a local append is not delivered from the old epoch.
  d.inbox.append(); // seq 4 again, another message
  // offer appends seq 5 and hands it over as a local append would.
  for (const effects of [d.heartbeat(), d.notify(4), d.offer(), d.login('c', { kind: 'after', seq: 5, epoch: 'ep1' })]) {
    assert.deepEqual(effects.filter((e) => e.kind === 'fetch' || e.kind === 'send'), []);
  }
  d.settle();
  assert.deepEqual(d.rotations, ['ep1'], 'one rotation');
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 5', ...msgs(5)]);
  assert.deepEqual(d.brief('b'), ['reset ep1-rotated 5', ...msgs(5)]);
  // c asked to resume in ep1, which is gone: reset, then everything (protocol.md rule 2).
  assert.deepEqual(d.brief('c'), ['welcome 1', 'reset ep1-rotated 5', ...msgs(5)]);
});

test('Redis restored with less, then appends passing the old latest before any pull (a batch): the local append landing on the highest seq delivered, as another message, brings the new epoch', () => {
  const d = caughtUp(5, { ...CONFIG, window: 10 });
  d.inbox.restoreTo(2);
  // Seqs 3..7 appended at once (one batch), then offered one by one as ingest does.
  d.inbox.append(5);
  for (let seq = 3; seq <= 7; seq++) {
    const { page, records } = d.inbox.read(seq - 1, 1);
    d.take(d.m.offer(page.entries[0] as InboxEntry, d.inbox.epoch as string, records[0] as StoredMessage));
  }
  d.settle();
  assert.deepEqual(d.rotations, ['ep1'], 'seq 5 came back as another message: one rotation');
  assert.deepEqual(d.rotationCauses, ['delivered']);
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 7', ...msgs(7)]);
});

test('a failed epoch rotation a read proved is asked for again at the next heartbeat, with no pull before it', () => {
  const d = caughtUp(5, { ...CONFIG, window: 10 });
  d.inbox.restoreTo(2);
  d.heartbeat();
  d.answer();
  assert.equal(d.rotating, true);
  // The rotation failed (Redis down): the inbox kept its epoch; nothing is read meanwhile.
  assert.deepEqual(d.rotationFailed(), []);
  assert.deepEqual(d.notify(), [], 'no fetch while the rotation is owed');
  // The session's retry (a heartbeat after its back-off) asks again.
  d.heartbeat();
  assert.equal(d.rotating, true);
  d.settle();
  assert.deepEqual(d.rotations, ['ep1', 'ep1']);
  assert.deepEqual(d.brief('a'), ['reset ep1-rotated 2', ...msgs(2)]);
});

// ---------------------------------------------------------------- backpressure, failures, logout

test('pause: nothing is sent to a paused connection; drain resumes where it stopped', () => {
  const d = new Driver({ ...CONFIG, window: 10 });
  d.inbox.append(2);
  d.login('a');
  d.login('b');
  d.settle();
  d.frames('a');
  d.frames('b');
  assert.deepEqual(d.take(d.m.pause('a')), []);
  d.inbox.append(2);
  d.notify(4);
  d.settle();
  assert.deepEqual(d.brief('a'), []);
  assert.deepEqual(d.brief('b'), ['msg 3', 'msg 4']);
  assert.equal(d.m.cursor('a')?.paused, true);
  d.take(d.m.drain('a'));
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 3', 'msg 4']);
  assert.deepEqual(d.take(d.m.drain('a')), [], 'drain of a connection not paused does nothing');
});

test('fetchFailed: no fetch loop; a later heartbeat fetches again', () => {
  const d = new Driver();
  d.inbox.append(2);
  d.login('a');
  assert.deepEqual(d.fail(), []);
  assert.equal(d.pending, undefined);
  assert.deepEqual(d.brief('a'), []);
  d.heartbeat();
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'msg 2']);
});

test('fetchFailed with connections at different cursors: one heartbeat serves them all', () => {
  const d = caughtUp(2, { ...CONFIG, window: 10 });
  d.inbox.append(3);
  d.login('b', after(5));
  d.answer(); // b joins at 5; a, at 2, is not served by that page
  assert.deepEqual(d.pending?.effect, { kind: 'fetch', afterSeq: 2, limit: 10 });
  d.fail(); // a's fetch
  d.heartbeat();
  d.settle();
  assert.deepEqual(d.brief('a'), msgs(3, 3));
  assert.deepEqual(d.brief('b'), ['welcome 6']);
});

test('logout of the connection a fetch was for: the fetch ends quietly', () => {
  const d = new Driver();
  d.inbox.append(2);
  d.login('a');
  assert.deepEqual(d.take(d.m.logout('a')), []);
  d.settle();
  assert.equal(d.fetches.length, 1);
  assert.equal(d.m.size, 0);
  assert.deepEqual(d.due('a'), []);
  assert.deepEqual(d.ack('a', 1), []);
});

test('a hole in the stream is a gap, never a stall', () => {
  const d = new Driver();
  d.inbox.append(5);
  // Seqs 2 and 3 removed by hand (XDEL): the stream has 1, 4, 5.
  d.inbox.holes.add(2).add(3);
  d.login('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'gap 2-3 trimmed', 'msg 4', 'msg 5']);
});

// Entries deleted by hand at the end of the stream: the inbox's latest seq (its counter)
// stays above the last entry kept, so a read after it has no entry to show the hole.
// A page with fewer entries than were asked for holds all there are: the rest is a gap.
test('a trailing hole (last entries deleted by hand) is told as a gap; two connections at different cursors do not fetch without end', () => {
  const d = new Driver({ window: 1, ackTimeoutMs: 10_000, backoffMs: [2_000, 4_000, 6_000], heartbeatMs: 25_000 });
  d.inbox.append(2);
  d.login('a');
  d.settle();
  d.ack('a', 1);
  d.settle();
  d.ack('a', 2);
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'msg 2']);
  d.login('b');
  d.settle();
  assert.deepEqual(d.brief('b'), ['welcome 1', 'msg 1']);
  // Seq 3 is appended; then an operator deletes seqs 2 and 3 (XDEL); the inbox's counter stays at 3.
  d.inbox.append(1);
  d.inbox.holes.add(2).add(3);
  d.notify(3);
  d.ack('b', 1);
  d.settle(); // the driver throws on a fetch loop
  assert.deepEqual(d.brief('a'), ['gap 3-3 trimmed']);
  assert.deepEqual(d.brief('b'), ['gap 2-3 trimmed']);
});

test('a single connection behind a trailing hole is told the gap at its next pull, not left behind until the next append', () => {
  const d = new Driver({ window: 10, ackTimeoutMs: 10_000, backoffMs: [2_000, 4_000, 6_000], heartbeatMs: 25_000 });
  d.inbox.append(1);
  d.login('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1']);
  d.inbox.append(2);
  d.inbox.holes.add(2).add(3);
  d.notify(3);
  d.settle();
  assert.deepEqual(d.brief('a'), ['gap 2-3 trimmed']);
  assert.equal(d.m.cursor('a')?.sent, 3);
});

test('a hole (entries deleted by hand) reached by a redelivery round is marked redelivered as far as its seqs went out before', () => {
  const d = new Driver({ window: 2, ackTimeoutMs: 10_000, backoffMs: [2_000, 4_000, 6_000], heartbeatMs: 25_000 });
  d.inbox.append(4);
  d.login('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'msg 2']);
  d.ack('a', 1);
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 3']);
  // Seqs 2 and 3 went out unacked; seqs 3 and 4 are deleted by hand (XDEL), seq 5 appended and kept.
  d.inbox.append(1);
  d.inbox.holes.add(3).add(4);
  d.due('a');
  d.settle();
  // Seq 3 went out on this connection (as msg 3): its part of the hole is marked.
  assert.deepEqual(d.brief('a'), ['msg 2 r', 'gap 3-3 trimmed r', 'gap 4-4 trimmed', 'msg 5']);
});

// Rounded up, never below the period a client sizes its silence limit by (twice it):
// rounded to the nearest, 1.2 s said 1 (the walk14 tester's F3).
test('welcome announces the heartbeat in whole seconds, rounded up, at least 1', () => {
  for (const [heartbeatMs, seconds] of [[200, 1], [1000, 1], [1200, 2], [1500, 2], [2001, 3], [25_000, 25]] as const) {
    const d = new Driver({ ...CONFIG, heartbeatMs });
    d.inbox.append(1);
    d.login('a');
    d.settle();
    const welcome = d.frames('a')[0];
    assert.equal(welcome?.t === 'welcome' ? welcome.heartbeat : undefined, seconds, `PIXIU_HEARTBEAT=${heartbeatMs}ms`);
  }
});

test('a fetch reads at most the page cap, however large the window', () => {
  const d = new Driver({ ...CONFIG, window: 5000, pageMax: 100 });
  d.inbox.append(1000);
  const effects = d.m.login('a', 'phone', FIRST);
  const fetch = effects.find((e) => e.kind === 'fetch');
  assert.deepEqual(fetch, { kind: 'fetch', afterSeq: 0, limit: 100 });
});

// ---------------------------------------------------------------- offers (local appends)

test('offer: a caught-up connection gets the appended message with no fetch', () => {
  const d = caughtUp(2, { ...CONFIG, window: 10 });
  const fetches = d.fetches.length;
  const effects = d.offer();
  assert.equal(d.fetches.length, fetches, 'no fetch');
  assert.deepEqual(d.brief('a'), ['msg 3']);
  assert.deepEqual(effects.filter((e) => e.kind === 'timer'), [{ kind: 'timer', conn: 'a', delayMs: CONFIG.ackTimeoutMs }], 'the redelivery timer is armed');
  d.offer();
  d.offer();
  assert.deepEqual(d.brief('a'), ['msg 4', 'msg 5']);
  assert.equal(d.fetches.length, fetches);
  d.ack('a', 5);
  assert.equal(d.pending, undefined, 'an ack of everything fetches nothing');
  assert.deepEqual(d.m.cursor('a'), { acked: 5, sent: 5, inflight: 0, paused: false });
});

test('offer: the frame is the one a fetch of that seq would send', () => {
  const viaFetch = caughtUp(2);
  viaFetch.inbox.append();
  viaFetch.notify(3);
  viaFetch.settle();
  const viaOffer = caughtUp(2);
  viaOffer.offer();
  assert.deepEqual(viaOffer.frames('a'), viaFetch.frames('a'));
});

test('offer: during a fetch it is a notify (no second fetch; one more after)', () => {
  const d = caughtUp(2, { ...CONFIG, window: 10 });
  d.heartbeat(); // a fetch in flight that read the inbox at latest 2
  const fetches = d.fetches.length;
  d.offer();
  assert.equal(d.fetches.length, fetches, 'no second fetch while one is in flight');
  d.answer();
  assert.ok(d.pending, 'the offer made the machine fetch again');
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 3']);
});

test('offer: a seq past the next one (an earlier append not yet seen) fetches from the cursor', () => {
  const d = caughtUp(2, { ...CONFIG, window: 10 });
  d.inbox.append(); // seq 3, its notify still on the way
  d.offer(); // seq 4
  assert.deepEqual(d.pending?.effect, { kind: 'fetch', afterSeq: 2, limit: 10 });
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 3', 'msg 4']);
});

test('offer: another epoch than the one last fetched fetches (and so resets)', () => {
  const d = caughtUp(2, { ...CONFIG, window: 10 });
  d.inbox.recreate('ep2');
  const effects = d.offer();
  assert.equal(fetchesIn(effects).length, 1, 'a fetch, not a delivery');
  d.settle();
  assert.deepEqual(d.brief('a'), ['reset ep2 1', 'msg 1']);
});

test('offer: a user with no inbox at login gets its first message with no fetch', () => {
  const d = new Driver({ ...CONFIG, window: 10 });
  d.inbox.recreate(null);
  d.login('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1']);
  const fetches = d.fetches.length;
  const effects = d.offer(); // creates the inbox: seq 1 of a new epoch
  assert.equal(fetchesIn(effects).length, 0, 'no fetch');
  assert.equal(d.fetches.length, fetches);
  assert.deepEqual(d.brief('a'), ['msg 1'], 'no reset: the connection never had an epoch');
  d.offer();
  assert.deepEqual(d.brief('a'), ['msg 2'], 'the new epoch is now the one known');
  d.ack('a', 2);
  assert.equal(d.m.cursor('a')?.acked, 2);
});

test('offer: with no inbox at login, an entry other than seq 1 is fetched for', () => {
  const d = new Driver({ ...CONFIG, window: 10 });
  d.inbox.recreate(null);
  d.login('a');
  d.settle();
  d.inbox.append(); // seq 1 from another node, its notify still on the way
  const effects = d.offer(); // seq 2
  assert.equal(fetchesIn(effects).length, 1, 'a fetch, not a delivery');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'msg 2']);
});

test('offer: with no inbox at the last read, a seq past 1 already notified is fetched for, never sent over a gap', () => {
  const d = new Driver({ ...CONFIG, window: 10 }, { strict: true });
  d.inbox.recreate(null);
  d.login('a');
  d.settle(); // read: no inbox
  d.inbox.append(); // seq 1 from another node creates it
  d.notify(1);
  d.fail(); // that pull failed: the epoch known is still null, the latest seq 1
  d.offer(); // seq 2, local
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'msg 2']);
});

test('offer: a full window or a paused connection is sent nothing; an ack or a drain goes on', () => {
  const d = caughtUp(0, { ...CONFIG, window: 2 });
  d.offer();
  d.offer();
  d.offer();
  assert.deepEqual(d.brief('a'), ['msg 1', 'msg 2'], 'the window holds');
  d.ack('a', 2);
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 3']);
  d.ack('a', 3);
  d.take(d.m.pause('a'));
  d.offer();
  assert.deepEqual(d.brief('a'), []);
  d.take(d.m.drain('a'));
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 4']);
});

test('offer: with one connection behind, the caught-up one gets it at once and the other is fetched for', () => {
  const d = new Driver({ ...CONFIG, window: 2 });
  d.inbox.append(1);
  d.login('a');
  d.login('b');
  d.settle();
  d.ack('a', 1);
  d.offer(); // seq 2: both can take it
  d.offer(); // seq 3: a has room, b is full (2 in flight)
  assert.deepEqual(d.brief('a').slice(-2), ['msg 2', 'msg 3']);
  assert.deepEqual(d.brief('b').slice(-1), ['msg 2']);
  d.ack('b', 2);
  d.settle();
  assert.deepEqual(d.brief('b'), ['msg 3']);
});

test('offer: a connection still joining is served by a fetch, welcome first', () => {
  const d = new Driver({ ...CONFIG, window: 10 });
  d.inbox.append(1);
  d.login('a');
  d.fail(); // its first fetch failed: still joining, no fetch in flight
  d.offer();
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'msg 2']);
});

test('offer: a connection that has not fetched yet (no epoch known) is fetched for', () => {
  const d = new Driver({ ...CONFIG, window: 10 });
  const effects = d.offer(); // the first append creates the inbox
  assert.equal(fetchesIn(effects).length, 0, 'no connection: nothing to do');
  d.login('a');
  d.settle();
  d.offer();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'msg 2']);
});

// A notified message waits for a heartbeat (25 s) only when the notify itself was lost
// (DESIGN.md §5). Three ways it waited with the notify received (a fresh review's
// finding, each shown by a test of its own).

for (const how of ['notify', 'offer'] as const) {
  test(`a ${how} during a fetch while the only connection's window is full is kept: its ack pulls the message`, () => {
    const d = new Driver({ ...CONFIG, window: 1 });
    d.inbox.append(1);
    d.login('a');
    d.settle(); // a: welcome, msg 1 (window full)
    d.login('b'); // another device: a fetch after 0 in flight
    d.take(d.m.logout('b')); // it goes away again
    if (how === 'notify') d.notify(d.inbox.append());
    else d.offer(); // seq 2
    d.answer(); // the page read before the append: latest 1
    d.brief('a');
    d.ack('a', 1); // window free again
    d.settle();
    assert.deepEqual(d.brief('a'), ['msg 2'], `a=${JSON.stringify(d.m.cursor('a'))}`);
  });
}

test('a notify of a recreated inbox\'s seq while every window is full is kept: the next ack pulls', () => {
  const d = new Driver({ ...CONFIG, window: 1 });
  d.inbox.append(1);
  d.login('a');
  d.settle(); // welcome, msg 1 (window full, and nothing more known)
  d.inbox.recreate('ep-new');
  d.notify(d.inbox.append()); // seq 1 of the new inbox: at or below the latest known
  d.brief('a');
  d.ack('a', 1);
  d.settle();
  assert.deepEqual(d.brief('a'), ['reset ep-new 1', 'msg 1']);
});

/**
 * `a` has acked seqs 1..3; a new device `c` logs in during a pull, seq 4 is notified
 * during it too, and the fetch that follows is `c`'s (from the first entry, 2 at a time).
 */
function newDeviceFetching(): Driver {
  const d = new Driver({ ...CONFIG, window: 10, pageMax: 2 });
  d.inbox.append(3);
  d.login('a', after(0));
  d.settle();
  d.ack('a', 3);
  d.settle();
  d.heartbeat(); // a pull in flight (after 3)
  d.login('c');
  d.notify(d.inbox.append()); // seq 4
  d.answer(); // c joins at 0; the pump picks c
  assert.deepEqual(d.pending?.effect, { kind: 'fetch', afterSeq: 0, limit: 2 });
  return d;
}

test('a fetch for a connection that closed before its page came does not leave another one behind waiting for a heartbeat', () => {
  const d = newDeviceFetching();
  d.take(d.m.logout('c')); // c goes away before its page comes
  d.answer(); // seqs 1..2: nothing for a (at 3)
  d.settle();
  assert.equal(d.m.cursor('a')?.sent, 4);
});

test('the same when the connection the fetch was for paused meanwhile and then closed (4009)', () => {
  const d = newDeviceFetching();
  d.take(d.m.pause('c'));
  d.answer();
  d.take(d.m.logout('c'));
  d.settle();
  assert.equal(d.m.cursor('a')?.sent, 4);
});
