/**
 * A WebSocket connection's pauses (src/gateway/ws-connection.ts, backpressure.ts), on a
 * stand-in `ws` WebSocket whose queue the test sets and whose writes it completes, with
 * mocked time: no socket, no Redis.
 *
 * - A write done while delivery is paused counts as hearing from the client
 *   (docs/protocol.md "Liveness and expiry"): the idle check, skipped while paused,
 *   counts the client's silence from the write that ended the pause, not from what it
 *   last sent before it (a slow reader of a catch-up sends nothing, walk20 2a).
 * - A page cut at its byte allowance (the `hold` effect) when that allowance was the
 *   budget's floor (the node at its budget as the page was built) is the budget's pause,
 *   counted in `pixiu_ws_budget_pauses_total` as one a write makes is; one cut at the
 *   connection's own high-water mark is not counted, as a write past that mark is not,
 *   even when the node reached its budget while the page was written (review35 2: the
 *   hold was judged by the node's state at the hold, and counted as the budget's).
 * - `send` answers whether it wrote the frame: none is written once the connection is
 *   closing, and a channel `gap` not written is not counted (connection-channels.ts, L9).
 */
import { mock, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import type { WebSocket } from 'ws';
import { loadConfig } from '../../src/config/config.js';
import { BufferBudget, budgetFloorBytes } from '../../src/gateway/buffer-budget.js';
import { CloseLogThinning } from '../../src/gateway/close-log.js';
import type { ConnectionDeps } from '../../src/gateway/gateway-deps.js';
import { WsConnection } from '../../src/gateway/ws-connection.js';
import { AckRounds } from '../../src/delivery/ack-rounds.js';
import { UserSession } from '../../src/delivery/session.js';
import type { Inbox, InboxPage } from '../../src/inbox/inbox.js';
import type { RecordReader } from '../../src/store/record-reader.js';
import type { StoredMessage } from '../../src/store/record.js';
import { createLogger } from '../../src/logger.js';
import { capturingLogger } from '../harness/log-capture.js';

const KiB = 1024;
const HIGH_WATER = 64 * KiB;
const IDLE_MS = 10_000;
const PAUSED_MS = 60_000;
const config = loadConfig({
  PIXIU_SOCKET_HIGH_WATER_BYTES: String(HIGH_WATER), PIXIU_IDLE_TIMEOUT: `${IDLE_MS}ms`, PIXIU_HEARTBEAT: '5s', PIXIU_PAUSED_TIMEOUT: `${PAUSED_MS}ms`,
});

/** The parts of a `ws` WebSocket a connection writes through: its queue is set by the test, its writes done when the test says. */
class StandInSocket {
  bufferedAmount = 0;
  terminated = false;
  /** Called at each frame written, before the connection measures its queue (the test sets what it holds then). */
  onSend: (() => void) | undefined;
  readonly #written: (() => void)[] = [];

  send(_frame: unknown, optionsOrDone?: { readonly binary: boolean } | (() => void), done?: () => void): void {
    const cb = typeof optionsOrDone === 'function' ? optionsOrDone : done;
    if (cb) this.#written.push(cb);
    this.onSend?.();
  }

  ping(_data: unknown, _mask: unknown, done?: () => void): void {
    if (done) this.#written.push(done);
  }

  terminate(): void {
    this.terminated = true;
  }

  /** The close handshake begins; the test never completes it. */
  close(): void {}

  /** The kernel took every write queued: each one's callback runs, in order. */
  completeWrites(): void {
    for (const done of this.#written.splice(0)) done();
  }
}

/** A connection on a {@link StandInSocket}, with the node's budget given (default: none), time mocked from here on. */
function connection(t: TestContext, budget = new BufferBudget(0, budgetFloorBytes(HIGH_WATER), capturingLogger().logger)): { conn: WsConnection; ws: StandInSocket } {
  mock.timers.enable({ apis: ['Date', 'setTimeout'], now: 1_000_000 });
  t.after(() => mock.timers.reset());
  const { logger } = capturingLogger();
  const deps = {
    config, corkFlushBytes: 16 * KiB, bufferBudget: budget, logger, closeLog: new CloseLogThinning(),
    clock: { add: () => undefined, delete: () => undefined, monotonicMs: () => Date.now() }, onHeartbeat: () => undefined, onFrames: () => undefined, onClosed: () => undefined,
  } as unknown as ConnectionDeps;
  const ws = new StandInSocket();
  const who = { id: 'c1', user: 'u1', device: 'd1', tags: [], channels: undefined, expiresAtMs: Number.MAX_SAFE_INTEGER, since: Date.now() };
  return { conn: new WsConnection(ws as unknown as WebSocket, who, deps), ws };
}

test('the write that ends a pause counts as hearing from the client: the idle check counts its silence from then', (t) => {
  const { conn, ws } = connection(t);
  // A frame leaves more than the high-water mark queued: delivery pauses.
  ws.bufferedAmount = HIGH_WATER + KiB;
  conn.send('{"t":"msg"}', 'msg');
  assert.notEqual(conn.whenWritable(), undefined, 'paused');
  // The client sends nothing for longer than the idle timeout, reading slowly: paused, it is not idle.
  mock.timers.tick(2 * IDLE_MS);
  conn.tick(Date.now(), Date.now());
  assert.equal(ws.terminated, false, 'paused: judged by the paused timeout alone');
  // Its reading drains the queue: the pause ends with that write.
  ws.bufferedAmount = 0;
  ws.completeWrites();
  assert.equal(conn.whenWritable(), undefined, 'the pause ended');
  conn.tick(Date.now() + 1, Date.now() + 1);
  assert.equal(ws.terminated, false, 'the write that ended the pause was heard: not silent for the idle timeout');
  conn.tick(Date.now() + IDLE_MS + 1, Date.now() + IDLE_MS + 1);
  assert.equal(ws.terminated, true, 'silent for the idle timeout after it: cut');
});

test('a page cut at its allowance while the node is at its budget is a pause by the budget, counted; one cut at the high-water mark is not', (t) => {
  let budgetPauses = 0;
  const budget = new BufferBudget(100 * KiB, budgetFloorBytes(HIGH_WATER), capturingLogger().logger, () => { budgetPauses += 1; });
  const { conn, ws } = connection(t, budget);
  // Under the budget, a page to it is cut at its high-water mark: not the budget's pause.
  ws.bufferedAmount = KiB;
  conn.send('{"t":"msg"}', 'msg');
  assert.deepEqual(conn.byteAllowance(), { bytes: HIGH_WATER - KiB, byBudget: false });
  conn.hold(conn.byteAllowance().byBudget);
  assert.notEqual(conn.whenWritable(), undefined, 'paused');
  assert.equal(budgetPauses, 0, 'the ordinary pause at its own high-water mark is not counted');
  ws.bufferedAmount = 0;
  ws.completeWrites();
  assert.equal(conn.whenWritable(), undefined, 'the pause ended');
  // Other connections hold the node's budget: a page to this one is cut at the floor.
  budget.recount(0, 100 * KiB);
  assert.deepEqual(conn.byteAllowance(), { bytes: budget.floorBytes, byBudget: true });
  // What the page wrote went to the kernel (the socket holds less than the floor): no write paused it.
  ws.bufferedAmount = KiB;
  conn.send('{"t":"msg"}', 'msg');
  assert.equal(conn.whenWritable(), undefined, 'not paused by the write');
  conn.hold(true);
  assert.notEqual(conn.whenWritable(), undefined, 'paused by the page cut at its allowance');
  assert.equal(budgetPauses, 1, 'the budget\'s pause is counted');
  // A write past the floor while at the budget pauses it too, counted once.
  ws.bufferedAmount = 0;
  ws.completeWrites();
  ws.bufferedAmount = budget.floorBytes + KiB;
  conn.send('{"t":"msg"}', 'msg');
  assert.notEqual(conn.whenWritable(), undefined, 'paused by the write');
  conn.hold(true);
  assert.equal(budgetPauses, 2, 'each pause once: a hold while paused is none');
});

test('a page cut at its high-water mark is not the budget\'s pause though the node reached its budget while the page was written', async (t) => {
  let budgetPauses = 0;
  const budget = new BufferBudget(100 * KiB, budgetFloorBytes(HIGH_WATER), capturingLogger().logger, () => { budgetPauses += 1; });
  const { conn, ws } = connection(t, budget);
  // Other connections hold 90 KiB of the node's 100 KiB: under it, a page's allowance is this connection's high-water mark.
  budget.recount(0, 90 * KiB);
  assert.deepEqual(conn.byteAllowance(), { bytes: HIGH_WATER, byBudget: false });
  // Each frame of the page (~10 KB) leaves at most 16 KiB queued, the kernel taking the rest: never past the
  // budget's floor (32 KiB), so no write pauses it, but the first already takes the node to its budget.
  ws.onSend = () => { ws.bufferedAmount = Math.min(ws.bufferedAmount + 10 * KiB, 16 * KiB); };
  const records: StoredMessage[] = Array.from({ length: 10 }, (_, i) => Object.freeze({
    id: `5e5f${i.toString(16).padStart(12, '0')}`, kind: 1 as const, type: 'chat.text', from: 'ana', data: 'x'.repeat(10_000), ts: 1_700_000_000_000, expiresAt: Number.MAX_SAFE_INTEGER,
  }));
  const page: InboxPage = { epoch: 'E', firstSeq: 1, latestSeq: records.length, entries: records.map((r, i) => ({ seq: i + 1, id: r.id, kind: 1 as const })) };
  const inbox = { range: async () => page, ack: async (_u: string, _d: string, s: number) => s } as unknown as Inbox;
  const byId = new Map(records.map((r) => [r.id, r]));
  const store: RecordReader = { isOpen: true, get: async (id: string) => byId.get(id) ?? null, getMany: async (ids: readonly string[]) => ids.map((id) => byId.get(id) ?? null) };
  const session = new UserSession('u1', { inbox, store, machine: { window: 20, ackTimeoutMs: 60_000, backoffMs: [60_000], heartbeatMs: 60_000 }, logger: createLogger('silent'), retryMs: 60_000 }, new AckRounds(100));
  session.login(conn, { kind: 'first' });
  t.after(() => session.logout(conn.id));
  for (let i = 0; i < 100 && conn.whenWritable() === undefined; i++) await new Promise((resolve) => setImmediate(resolve));
  assert.notEqual(conn.whenWritable(), undefined, 'the page was cut at its allowance: paused');
  assert.equal(budget.reached, true, 'the node is at its budget now');
  assert.equal(budgetPauses, 0, 'its allowance was the high-water mark: the ordinary pause, not counted as the budget\'s');
});

test('send answers whether it wrote the frame: true while open, false once the connection is closing', (t) => {
  const { conn } = connection(t);
  assert.equal(conn.send('{"t":"gap"}', 'gap'), true);
  conn.close(4000, 'test');
  assert.equal(conn.send('{"t":"gap"}', 'gap'), false);
});
