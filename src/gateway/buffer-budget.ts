/**
 * A node-wide bound on the bytes its WebSockets hold written and not yet taken by the
 * kernel (`PIXIU_SOCKET_BUFFER_BUDGET_BYTES`; README "Memory for clients that do not
 * read"; docs/decisions.md "A node's budget for its send buffers"). Each socket is held
 * to its high-water mark and hard cap (backpressure.ts), but nothing bounded their sum:
 * 5,000 clients that stop reading after a restart could hold ~30 GB, and a few hundred
 * users with valid tokens could take a node's memory.
 *
 * The node keeps a running sum of what each connection holds (`ws`'s `bufferedAmount`,
 * the measure backpressure.ts judges by), updated where a connection measures it —
 * after each write and at each write's completion — and cleared when it closes: O(1)
 * per write, no scan of the connections. While the sum is at or over the budget, a
 * connection whose write leaves it holding more than {@link budgetFloorBytes} is paused
 * as one past its high-water mark is (its `Pause`, its paused timeout, its 4009), and
 * that pause ends only when it holds no more than the floor again, or the node is back
 * under its budget, and below the usual resume mark. Clients that read drain at once
 * and keep receiving live; what is held back stays in the inboxes and the store, so
 * nothing is lost. A delivery page to a connection stops at the message that reaches
 * the floor while the node is at its budget (its high-water mark otherwise: delivery's
 * ByteRoom, backpressure.ts `pageAllowance`), so a connection passes the floor by one
 * message at most. Live broadcasts and channel publications are not held back by a
 * pause (they are not kept for the connection): while the node is at its budget, one
 * for a connection paused with more than the floor queued closes it 4009 instead of
 * being written ({@link BufferBudget.refusesLive}), as the hard cap would later — the
 * client reconnects and catches up from its `last_bseq` (a channel's from its `since`),
 * at its pace. Before, they were written until the hard cap: 5 non-reading devices held
 * 40 MB against a 1 MiB budget (walk19 F3).
 */
import os from 'node:os';
import type { Logger } from '../logger.js';
import { LogThrottle, OUTAGE_LOG_INTERVAL_MS, thinnedFields } from '../log-throttle.js';

const MiB = 1024 * 1024;

/** Most a connection holds before the budget, once reached, pauses it: 64 KiB (or less: {@link budgetFloorBytes}). */
export const BUDGET_FLOOR_BYTES = 64 * 1024;

/** The default budget's share of the memory the process may use: a quarter. */
export const DEFAULT_BUDGET_SHARE = 4;

/** The most the default budget is, whatever the memory: 2 GiB. */
export const DEFAULT_BUDGET_CAP_BYTES = 2048 * MiB;

/**
 * The close reason (4009) of a connection refused a live broadcast or publication by
 * the budget ({@link BufferBudget.refusesLive}); logged with the close, as every 4009.
 */
export const LIVE_REFUSED_REASON = 'slow consumer: held back at the node\'s send-buffer budget when a live broadcast or publication came';

/** The warning logged (thinned) when the budget pauses a connection. */
export const BUDGET_REACHED_LOG = 'websocket send buffers at the node\'s budget: connections holding more than the floor are paused';

/**
 * The floor of {@link BufferBudget}: {@link BUDGET_FLOOR_BYTES}, or half the high-water
 * mark when that is less (the usual resume mark, below which a pause ends anyway).
 * @param highWaterBytes `PIXIU_SOCKET_HIGH_WATER_BYTES`, bytes
 */
export function budgetFloorBytes(highWaterBytes: number): number {
  return Math.min(BUDGET_FLOOR_BYTES, Math.floor(highWaterBytes / 2));
}

/**
 * The default of `PIXIU_SOCKET_BUFFER_BUDGET_BYTES`: a quarter of the memory the process
 * may use — the machine's, or the container's limit (cgroup) when it is lower — at most
 * {@link DEFAULT_BUDGET_CAP_BYTES}.
 * @param totalBytes the machine's memory (`os.totalmem()`), bytes
 * @param constrainedBytes the process's memory limit (`process.constrainedMemory()`);
 *   undefined or 0: none
 * @returns bytes, at least 1
 */
export function defaultBufferBudget(totalBytes: number, constrainedBytes?: number): number {
  const limit = constrainedBytes !== undefined && constrainedBytes > 0 && constrainedBytes < totalBytes ? constrainedBytes : totalBytes;
  return Math.max(1, Math.min(DEFAULT_BUDGET_CAP_BYTES, Math.floor(limit / DEFAULT_BUDGET_SHARE)));
}

/** This process's memory: the machine's, and its limit where Node reads one (cgroup; undefined or 0 without). */
function processMemory(): { total: number; constrained: number | undefined } {
  const constrained = (process as { constrainedMemory?: () => number | undefined }).constrainedMemory?.();
  return { total: os.totalmem(), constrained };
}

/**
 * The node's budget: `PIXIU_SOCKET_BUFFER_BUDGET_BYTES` when given (0: none), else
 * {@link defaultBufferBudget} of the process's memory. Logged in one info line at start.
 * @param readMemory the machine's memory and the process's limit (default: this process's)
 * @returns bytes; 0 when the sum is not bounded
 */
export function resolveBufferBudget(given: number | undefined, logger: Logger, readMemory = processMemory): number {
  if (given !== undefined) {
    logger.info({ socketBufferBudgetBytes: given }, given === 0
      ? 'websocket send buffers not bounded node-wide (PIXIU_SOCKET_BUFFER_BUDGET_BYTES 0)'
      : 'websocket send buffers bounded node-wide (PIXIU_SOCKET_BUFFER_BUDGET_BYTES)');
    return given;
  }
  const { total, constrained } = readMemory();
  const budget = defaultBufferBudget(total, constrained);
  // A limit at or above the machine's memory is none (cgroup v1's "unlimited" reads as ~2^64).
  const limit = constrained !== undefined && constrained > 0 && constrained < total ? constrained : null;
  logger.info({ socketBufferBudgetBytes: budget, totalMemoryBytes: total, memoryLimitBytes: limit },
    'websocket send buffers bounded node-wide (PIXIU_SOCKET_BUFFER_BUDGET_BYTES unset: a quarter of memory, at most 2 GiB)');
  return budget;
}

/**
 * The node's running sum of its WebSockets' held bytes and its budget (module comment).
 * Each connection keeps the bytes it last counted and hands them back with what it
 * holds now ({@link recount}); the sum is the total of those, never negative.
 */
export class BufferBudget {
  /** The budget, bytes; 0: no bound (the sum is still kept, for the gauge). */
  readonly budgetBytes: number;
  /** What a connection may hold and not be paused by the budget, bytes. */
  readonly floorBytes: number;
  readonly #logger: Logger;
  readonly #log = new LogThrottle(OUTAGE_LOG_INTERVAL_MS);
  readonly #onPause: () => void;
  readonly #onRefused: () => void;
  #held = 0;

  /**
   * @param budgetBytes the budget ({@link resolveBufferBudget}); 0: none
   * @param floorBytes {@link budgetFloorBytes}
   * @param onPause each pause the budget causes (metrics: `pixiu_ws_budget_pauses_total`)
   * @param onRefused each live broadcast or publication it refuses, closing its
   *   connection 4009 ({@link refusesLive}; metrics: `pixiu_ws_budget_closes_total`)
   */
  constructor(budgetBytes: number, floorBytes: number, logger: Logger, onPause: () => void = () => undefined, onRefused: () => void = () => undefined) {
    this.budgetBytes = budgetBytes;
    this.floorBytes = floorBytes;
    this.#logger = logger;
    this.#onPause = onPause;
    this.#onRefused = onRefused;
  }

  /** Bytes the node's WebSockets hold, as they last counted them. */
  get heldBytes(): number {
    return this.#held;
  }

  /** True while the sum is at or over a budget that is set. */
  get reached(): boolean {
    return this.budgetBytes > 0 && this.#held >= this.budgetBytes;
  }

  /**
   * A connection that counted `counted` bytes holds `buffered` now (0 once closed).
   * @returns `buffered`: what it has counted from now on
   */
  recount(counted: number, buffered: number): number {
    this.#held += buffered - counted;
    return buffered;
  }

  /** True when a connection not paused that holds `buffered` after a write is to be paused by the budget. */
  pauses(buffered: number): boolean {
    return buffered > this.floorBytes && this.reached;
  }

  /** True when a pause the budget caused may end with `buffered` held (the usual resume mark is checked too). */
  releases(buffered: number): boolean {
    return buffered <= this.floorBytes || !this.reached;
  }

  /**
   * Before a live broadcast or channel publication is written to a connection: refused
   * while the sum is at or over the budget, the connection paused (by the budget or its
   * high-water mark) and holding more than the floor. The connection is then closed 4009
   * instead (ws-connection.ts), which frees what it holds within its close's grace and
   * writes it nothing more: the client reconnects and catches up from its `last_bseq`,
   * or a channel's `since`, at its own pace (docs/protocol.md "Flow control"). A pause
   * holds back the inbox and the catch-ups, which stay in Redis and the store, but not
   * these, which no one keeps for the connection: without this, each paused one took
   * them up to its hard cap whatever the budget. Counted when refused.
   * @param buffered what the connection holds, bytes
   * @param paused whether its delivery is paused
   * @returns the close reason ({@link LIVE_REFUSED_REASON}) when refused; undefined: write it
   */
  refusesLive(buffered: number, paused: boolean): string | undefined {
    if (!paused || !this.pauses(buffered)) return undefined;
    this.#onRefused();
    return LIVE_REFUSED_REASON;
  }

  /**
   * Counts a pause the budget caused — a write past the floor ({@link pauses}), or a
   * delivery page cut at the floor, its allowance while {@link reached} (ws-connection.ts
   * `hold`) — and logs it at warn, at most once per 10 s with how many were left out.
   * @param conn the connection paused, and what it holds, bytes
   */
  paused(conn: string, bufferedBytes: number): void {
    this.#onPause();
    const left = this.#log.take();
    if (left === undefined) return;
    this.#logger.warn({ heldBytes: this.#held, budgetBytes: this.budgetBytes, floorBytes: this.floorBytes, conn, bufferedBytes, ...thinnedFields(left) },
      BUDGET_REACHED_LOG);
  }
}
