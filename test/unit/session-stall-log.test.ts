/**
 * A delivery stall's log lines (src/delivery/stall-log.ts, docs/api.md "Errors"): a
 * user whose pulls go on failing is logged again at the node's pace, once per 10 s,
 * each line with `failures` (in a row), `stalledMs` and `notLogged`; when a pull
 * succeeds again, one info line `delivery resumed` says for how long it was stalled.
 * (An ops finding: a user stalled a whole minute behind a stopped node was one warning
 * at its start, then nothing, and nothing when it ended.)
 *
 * The session and machine are the real ones, with the node's 10-s throttle and the
 * gateway's 1-s retry; the message's record read fails as the store router's does for a
 * partition whose node is not running; time is Node's mock timers (setTimeout, Date),
 * `performance.now()` with them.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import type { Inbox, InboxPage } from '../../src/inbox/inbox.js';
import type { RecordReader } from '../../src/store/record-reader.js';
import type { StoredMessage } from '../../src/store/record.js';
import { unavailable } from '../../src/errors.js';
import { AckRounds } from '../../src/delivery/ack-rounds.js';
import { UserSession, type DeliveryConnection } from '../../src/delivery/session.js';
import { LogThrottle, OUTAGE_LOG_INTERVAL_MS } from '../../src/log-throttle.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { CONFIG } from './machine-driver.js';

const FETCH_FAILED = 'delivery fetch failed, will retry';
const NOT_RUNNING = 'message partition 8 is held by store 0c78df171ba12b95, whose lease has lapsed (its node stopped or could not renew it in time, or Redis\'s clock stepped forward); retry later';
const ID = '0000000000000001';

/** A session of `u99` whose one message's record cannot be read until `down.value` is false; its frames' types in `frames`. */
function stalledSession(down: { value: boolean }): { session: UserSession; conn: DeliveryConnection; lines: LogLine[]; frames: string[] } {
  const { logger, lines } = capturingLogger();
  const page: InboxPage = { epoch: 'E', firstSeq: 1, latestSeq: 1, entries: [{ seq: 1, id: ID, kind: 1 }] };
  const inbox = { range: async (): Promise<InboxPage> => page } as unknown as Inbox;
  const record: StoredMessage = { id: ID, kind: 1, type: 't', data: 1, ts: 1, expiresAt: Number.MAX_SAFE_INTEGER };
  const store: RecordReader = {
    isOpen: true,
    get: async () => null,
    getMany: async () => {
      if (down.value) throw unavailable(NOT_RUNNING);
      return [record];
    },
  };
  const session = new UserSession('u99', {
    inbox, store, machine: { ...CONFIG, heartbeatMs: 3_600_000 }, logger, retryMs: 1000,
    fetchFailureLog: new LogThrottle(OUTAGE_LOG_INTERVAL_MS),
  }, new AckRounds(100));
  const frames: string[] = [];
  const conn: DeliveryConnection = { id: 'z', device: 'z', send: (text) => { frames.push(String((JSON.parse(text.toString()) as { t: unknown }).t)); }, close: () => undefined };
  session.login(conn, { kind: 'first' });
  return { session, conn, lines, frames };
}

/**
 * Node's mock timers (setTimeout, Date) from here on, and `performance.now()` (what
 * `stalledMs` is measured on, stall-log.ts) moved with them: Node 20 does not mock it.
 */
function mockClocks(t: TestContext): void {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
  t.mock.method(performance, 'now', () => Date.now());
}

/** Lets the promise callbacks of a pull run (it awaits the inbox, then the records). */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** Moves the mock clock on `ms`, a second at a time, letting each retry's pull settle. */
async function advance(mock: { tick(ms: number): void }, ms: number): Promise<void> {
  for (let done = 0; done < ms; done += 1000) {
    mock.tick(1000);
    await settle();
  }
}

test('a stall that goes on is logged every 10 s with failures, stalledMs and notLogged; its end is one info line with how long it lasted', async (t) => {
  mockClocks(t);
  const down = { value: true };
  const { session, lines, frames } = stalledSession(down);
  await settle();
  const warnings = () => lines.filter((l) => l.msg === FETCH_FAILED && l.level === 40);
  assert.equal(warnings().length, 1, JSON.stringify(lines));
  assert.deepEqual([warnings()[0]?.failures, warnings()[0]?.stalledMs, warnings()[0]?.notLogged], [1, 0, undefined]);
  assert.equal(warnings()[0]?.reason, NOT_RUNNING);

  // Retries 1, 2, 4, 4, 4 … s apart (at 1, 3, 7, 11, 15, 19, 23, 27 s): the first at or
  // past 10 s since the last line is logged, with the ones left out since.
  await advance(t.mock.timers, 30_000);
  const logged = warnings().map((l) => [l.failures, l.stalledMs, l.notLogged]);
  assert.deepEqual(logged, [[1, 0, undefined], [5, 11_000, 3], [8, 23_000, 2]], JSON.stringify(lines));
  // The rest are debug lines: every failed pull is in the log at debug.
  assert.equal(lines.filter((l) => l.msg === FETCH_FAILED).length, 9);
  assert.deepEqual(frames, [], 'no welcome while its first page cannot be read');
  assert.deepEqual(lines.filter((l) => l.msg === 'delivery resumed'), []);

  // The node is back: the next retry (at 31 s) delivers, and the stall's end is logged.
  down.value = false;
  await advance(t.mock.timers, 4000);
  assert.deepEqual(frames, ['welcome', 'msg']);
  const resumed = lines.filter((l) => l.msg === 'delivery resumed');
  assert.equal(resumed.length, 1, JSON.stringify(lines));
  assert.deepEqual([resumed[0]?.level, resumed[0]?.user, resumed[0]?.failures, resumed[0]?.stalledMs], [30, 'u99', 9, 31_000]);
  session.logout('z');
  assert.equal(lines.filter((l) => l.msg === 'delivery resumed' || /stall over/.test(String(l.msg))).length, 1, 'its end is logged once');
});

test('a stall whose user leaves before any pull succeeds is closed by one info line; a later login that delivers logs no resume', async (t) => {
  mockClocks(t);
  const down = { value: true };
  const { session, conn, lines, frames } = stalledSession(down);
  await settle();
  await advance(t.mock.timers, 3000);
  assert.equal(lines.filter((l) => l.msg === FETCH_FAILED).length, 3, JSON.stringify(lines));
  assert.equal(session.logout('z'), true);
  const over = lines.filter((l) => l.msg === 'delivery stall over: the user has no connection left on this node');
  assert.deepEqual(over.map((l) => [l.level, l.user, l.failures, l.stalledMs]), [[30, 'u99', 3, 3000]]);
  down.value = false;
  session.login(conn, { kind: 'first' });
  await settle();
  assert.deepEqual(frames, ['welcome', 'msg']);
  assert.deepEqual(lines.filter((l) => l.msg === 'delivery resumed'), [], 'no stall was on');
  session.logout('z');
  assert.equal(lines.filter((l) => /stall over/.test(String(l.msg))).length, 1, 'logged once');
});
