/**
 * A connection's silence is measured on a clock that never steps (src/gateway/
 * connection-clock.ts, docs/protocol.md "Liveness and expiry"): the node's real
 * ConnectionClock ticks a WebSocket connection (on a stand-in `ws` WebSocket) with
 * real timers, while the test steps the wall clock (`Date`, mocked) as NTP or a resumed
 * VM would; `performance.now()` goes on untouched, as on a real host.
 *
 * - A forward step of an hour does not cut the connection as silent for an hour
 *   (walk31 F4: every connection of the node closed 1006, `silentMs` 3,600,179).
 * - After a backward step of an hour a silent connection is still cut at the idle
 *   timeout (walk31 F4b: it stayed, with its presence and its slot of the per-user
 *   limit, for the size of the step).
 * - A token's `exp` is a wall-clock time and is still judged on the wall clock: a
 *   forward step past it closes the connection 4001.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import type { WebSocket } from 'ws';
import { loadConfig } from '../../src/config/config.js';
import { BufferBudget, budgetFloorBytes } from '../../src/gateway/buffer-budget.js';
import { CloseLogThinning } from '../../src/gateway/close-log.js';
import { ConnectionClock, type Ticking } from '../../src/gateway/connection-clock.js';
import type { ConnectionDeps } from '../../src/gateway/gateway-deps.js';
import { WsConnection } from '../../src/gateway/ws-connection.js';
import { capturingLogger } from '../harness/log-capture.js';

const HEARTBEAT_MS = 60;
const IDLE_MS = 400;
const HOUR_MS = 3_600_000;
const config = loadConfig({ PIXIU_IDLE_TIMEOUT: `${IDLE_MS}ms`, PIXIU_HEARTBEAT: `${HEARTBEAT_MS}ms` });

/** The parts of a `ws` WebSocket the connection's clock uses: pings, a close, a terminate. */
class StandInSocket {
  bufferedAmount = 0;
  terminated = false;
  closedWith: number | undefined;
  ping(_data: unknown, _mask: unknown, done?: () => void): void { done?.(); }
  close(code: number): void { this.closedWith = code; }
  terminate(): void { this.terminated = true; }
}

/**
 * Resolves once the clock has visited its members `n` more times (a member added after
 * the connection: it is visited after it). The clock's interval keeps no process alive
 * (it is unref'd): a timer of the test's does meanwhile.
 */
function ticksOf(clock: ConnectionClock, n: number): Promise<void> {
  const alive = setInterval(() => undefined, 1000);
  return new Promise((resolve) => {
    let left = n;
    const probe: Ticking = { tick: () => { if (--left === 0) { clock.delete(probe); clearInterval(alive); resolve(); } } };
    clock.add(probe);
  });
}

/** A connection ticked by the node's real clock; the wall clock (`Date`) mocked from here on, real timers. */
function connection(t: TestContext, expiresAtMs = Number.MAX_SAFE_INTEGER): { conn: WsConnection; ws: StandInSocket; clock: ConnectionClock; lines: { msg: string; silentMs?: number }[] } {
  t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
  const clock = new ConnectionClock(ConnectionClock.tickFor(HEARTBEAT_MS));
  t.after(() => clock.stop());
  const { logger, lines } = capturingLogger();
  const deps = {
    config, corkFlushBytes: 16 * 1024, bufferBudget: new BufferBudget(0, budgetFloorBytes(config.socketHighWaterBytes), logger), logger,
    closeLog: new CloseLogThinning(), clock, onHeartbeat: () => undefined, onFrames: () => undefined, onClosed: () => undefined,
  } as unknown as ConnectionDeps;
  const ws = new StandInSocket();
  const who = { id: 'c1', user: 'u1', device: 'd1', tags: [], channels: undefined, expiresAtMs, since: Date.now() };
  const conn = new WsConnection(ws as unknown as WebSocket, who, deps);
  clock.add(conn);
  return { conn, ws, clock, lines: lines as unknown as { msg: string; silentMs?: number }[] };
}

test('a forward step of the wall clock by an hour does not cut a connection as silent', async (t) => {
  const { ws, clock } = connection(t);
  await ticksOf(clock, 1);
  t.mock.timers.setTime(Date.now() + HOUR_MS);
  await ticksOf(clock, 3);
  assert.equal(ws.terminated, false, 'heard from a moment ago by the monotonic clock: not idle');
  assert.equal(ws.closedWith, undefined);
});

test('after a backward step of the wall clock by an hour a silent connection is still cut at the idle timeout', async (t) => {
  const { ws, clock, lines } = connection(t);
  const started = performance.now();
  t.mock.timers.setTime(Date.now() - HOUR_MS);
  // Ticks until it is cut, or for three idle timeouts at most (real time).
  while (!ws.terminated && performance.now() - started < 3 * IDLE_MS) await ticksOf(clock, 1);
  assert.equal(ws.terminated, true, 'silent for the idle timeout (the stand-in never answers a ping): cut');
  const silentMs = lines.find((l) => l.msg === 'idle connection terminated')?.silentMs;
  assert.ok(silentMs !== undefined && silentMs > IDLE_MS && silentMs < 3 * IDLE_MS, `silentMs ${silentMs} is the real silence, not the step`);
});

test("a token's exp is judged on the wall clock: a forward step past it closes the connection 4001", async (t) => {
  const { ws, clock } = connection(t, Date.now() + HOUR_MS);
  await ticksOf(clock, 1);
  assert.equal(ws.closedWith, undefined, 'the token has an hour left');
  t.mock.timers.setTime(Date.now() + HOUR_MS + 1000);
  await ticksOf(clock, 1);
  assert.equal(ws.closedWith, 4001, 'past its exp by the wall clock: closed token expired');
  assert.equal(ws.terminated, false, 'closed for its token, not cut as silent');
});
