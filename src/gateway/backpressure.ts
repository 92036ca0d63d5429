/**
 * Backpressure of one socket (DESIGN.md §5): delivery pauses when the bytes queued
 * on the socket pass the high-water mark (`PIXIU_SOCKET_HIGH_WATER_BYTES`), resumes once
 * they drain below half of it, and the connection is closed 4009 when the queue
 * passes the hard cap (`PIXIU_SOCKET_HARD_CAP_BYTES`) or, paused, drains nothing for
 * `PIXIU_PAUSED_TIMEOUT`. These functions decide and the connection acts
 * (ws-connection.ts); its one piece of state is a {@link Pause}, made when delivery
 * pauses and dropped when the pause ends. No object per connection otherwise: an idle
 * connection's memory is a target (bench:e2e, case c).
 */
import type { Socket } from 'node:net';
import type { PageAllowance } from '../delivery/effects.js';
import type { BufferBudget } from './buffer-budget.js';

/** The settings read (bytes). */
export interface BackpressureLimits {
  readonly socketHighWaterBytes: number;
  readonly socketHardCapBytes: number;
}

/** What a write asks of the connection: `budget` is a pause the node's budget asks for (buffer-budget.ts). */
export type WriteVerdict = 'ok' | 'pause' | 'budget' | 'close';

/** The node's budget as a connection's checks see it (buffer-budget.ts `BufferBudget`). */
export type BudgetCheck = Pick<BufferBudget, 'pauses' | 'releases'>;

/**
 * After a write that left `buffered` bytes queued.
 * @param paused whether delivery is paused already
 * @param budget the node's budget; absent: none
 * @returns `close` over the hard cap; `pause` when this write crossed the high-water
 *   mark, `budget` when it left more than the budget's floor while the node is at its
 *   budget (either: pause delivery and start the paused-too-long timer); `ok` otherwise
 */
export function afterWrite(buffered: number, paused: boolean, limits: BackpressureLimits, budget?: BudgetCheck): WriteVerdict {
  if (buffered > limits.socketHardCapBytes) return 'close';
  if (paused) return 'ok';
  if (buffered > limits.socketHighWaterBytes) return 'pause';
  return budget?.pauses(buffered) === true ? 'budget' : 'ok';
}

/**
 * What a delivery page may write to a connection holding `buffered` bytes (its byte
 * allowance, delivery's ByteRoom: src/delivery/effects.ts): up to its high-water mark,
 * or up to the budget's floor while the node is at its budget (`byBudget`, which the
 * page's `hold` carries back: its pause is then the budget's); 0 or less: one message.
 * @returns bytes, and whether they are the budget's
 */
export function pageAllowance(buffered: number, limits: BackpressureLimits, budget: Pick<BufferBudget, 'reached' | 'floorBytes'>): PageAllowance {
  const byBudget = budget.reached;
  return { bytes: (byBudget ? budget.floorBytes : limits.socketHighWaterBytes) - buffered, byBudget };
}

/** A write completed with `buffered` bytes still queued: true when a pause ends (below half the high-water mark). */
export function drained(buffered: number, paused: boolean, limits: BackpressureLimits): boolean {
  return paused && buffered < limits.socketHighWaterBytes / 2;
}

/**
 * A write completed with `buffered` bytes still queued: true when `pause` ends — it
 * {@link drained}, and a pause the budget made is released by it too.
 */
export function endsPause(pause: Pause | undefined, buffered: number, limits: BackpressureLimits, budget: BudgetCheck): pause is Pause {
  return pause !== undefined && drained(buffered, true, limits) && (!pause.byBudget || budget.releases(buffered));
}

/**
 * How far a socket's queue has drained, as a {@link Pause} compares it from one check
 * to the next ({@link drainedSince}). Node lets a socket's queue (`writableLength`,
 * and so `ws`'s `bufferedAmount`) fall only when a whole write is done, and a write
 * after a stall is everything queued meanwhile (`writev`, MBs): a client reading
 * 80 KB/s took longer than the 30 s paused timeout to finish one, and was closed 4009
 * as one that did not read (slowclient F4). What the kernel takes of the write in
 * progress is seen in libuv's write queue (`writeQueueSize`, bytes still to go: the
 * measure Node's own socket timeout uses for write progress).
 */
export interface DrainMark {
  /** Bytes of the socket's writes done, whole (`bytesWritten` − `writableLength`). */
  readonly doneBytes: number;
  /** Bytes of the write in progress the kernel has not taken yet; 0 with none. */
  readonly leftBytes: number;
}

/**
 * True when the queue drained between `before` and `now`: a write was done, or the
 * kernel took more of the one in progress. A write started since (nothing was in
 * progress before) is no drain, though the kernel may have taken part of it at once:
 * the next check sees the rest go.
 */
export function drainedSince(before: DrainMark, now: DrainMark): boolean {
  return now.doneBytes > before.doneBytes || (now.doneBytes === before.doneBytes && now.leftBytes < before.leftBytes);
}

/**
 * The {@link DrainMark} of the TCP socket under a WebSocket ({@link socketDrainMark}).
 * Without the socket (not found at the upgrade), the `ws` queue alone: it drains when
 * `bufferedAmount` falls.
 */
export function drainMarkOf(socket: Socket | undefined, ws: { readonly bufferedAmount: number }): DrainMark {
  return socket === undefined ? { doneBytes: 0, leftBytes: ws.bufferedAmount } : socketDrainMark(socket);
}

/** The {@link DrainMark} of a TCP socket: its writes done, and what the kernel has still to take of the one in progress. */
export function socketDrainMark(socket: Socket): DrainMark {
  // `_handle` is Node's libuv stream (null once the socket is closed: no drain then).
  const handle = (socket as unknown as { _handle?: { writeQueueSize?: number } | null })._handle;
  return { doneBytes: (socket.bytesWritten ?? 0) - socket.writableLength, leftBytes: handle?.writeQueueSize ?? 0 };
}

/** Checks of a {@link Pause} per paused timeout: the close comes up to a quarter of it late. */
export const PAUSE_CHECKS = 4;

/**
 * A connection's pause, from the write that crossed the high-water mark to the
 * {@link drained} write or the close: its paused-too-long clock and the catch-ups
 * waiting for it to end (broadcasts from `last_bseq`, a channel's history). The clock
 * measures time without drain, not time paused: a client reading slower than it takes
 * the queue to fall to half the high-water mark within `PIXIU_PAUSED_TIMEOUT` is
 * served at its pace; one that stops reading is closed once the queue has not moved
 * for that long.
 */
export class Pause {
  /** Made by the node's budget (buffer-budget.ts), not the socket's high-water mark: it ends only as the budget allows. */
  readonly byBudget: boolean;
  #timer: NodeJS.Timeout | undefined;
  readonly #stepMs: number;
  readonly #readMark: () => DrainMark;
  readonly #onTimeout: () => void;
  #mark: DrainMark;
  /** Checks in a row that saw no drain. */
  #quiet = 0;
  /** Made by the first waiter (most pauses have none). */
  #waiters: (() => void)[] | undefined;

  /**
   * Starts the clock: the queue is read every quarter of `timeoutMs`.
   * @param timeoutMs `PIXIU_PAUSED_TIMEOUT`, ms
   * @param onTimeout called once, when {@link PAUSE_CHECKS} checks in a row (`timeoutMs`)
   *   saw the queue drain nothing (the connection closes 4009): between `timeoutMs` and
   *   a quarter more after the client's last read the kernel took
   * @param readMark where the socket's queue stands ({@link drainMarkOf})
   * @param byBudget see {@link byBudget}
   */
  constructor(timeoutMs: number, onTimeout: () => void, readMark: () => DrainMark, byBudget = false) {
    this.byBudget = byBudget;
    this.#readMark = readMark;
    this.#onTimeout = onTimeout;
    this.#mark = readMark();
    this.#stepMs = timeoutMs / PAUSE_CHECKS;
    this.#timer = setTimeout(this.#check, this.#stepMs);
  }

  readonly #check = (): void => {
    this.#timer = undefined;
    const mark = this.#readMark();
    if (drainedSince(this.#mark, mark)) this.#quiet = 0;
    else if (++this.#quiet >= PAUSE_CHECKS) {
      this.#onTimeout();
      return;
    }
    this.#mark = mark;
    this.#timer = setTimeout(this.#check, this.#stepMs);
  };

  /** A promise that resolves when the pause ends ({@link end}). */
  whenOver(): Promise<void> {
    return new Promise((resolve) => (this.#waiters ??= []).push(resolve));
  }

  /** Ends the pause: stops the clock and wakes every waiter once. Idempotent. */
  end(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const waiters = this.#waiters;
    this.#waiters = undefined;
    if (waiters !== undefined) for (const wake of waiters) wake();
  }
}
