/**
 * The node's budget for history answers (`GET /v1/users/{uid}/messages`,
 * `GET /v1/me/messages`; src/api/history.ts): bytes of pages being read, or written and
 * not yet taken by their clients. A page is at most about 1 MiB, but nothing bounded how
 * many were held at once: a fresh tester's 1,500 connections, each pipelining history
 * requests and never reading the answers, held gigabytes of them and the node died out
 * of memory, with a user's own token. Past the budget a history request is answered
 * 503 UNAVAILABLE with `Retry-After`, read nothing, and the node lives.
 *
 * One user's answers hold at most {@link HISTORY_BYTES_PER_USER} of it: past that a
 * request for that user's inbox is 429 RATE_LIMITED (with `Retry-After`), and the rest of the budget stays
 * for the others (a security tester's finding: one account keeping 40 requests of its
 * own empty inbox in flight, each holding a full page's 2 MiB while it was read, made
 * 11 – 36 % of other users' history requests 503).
 */
import type { Socket } from 'node:net';
import type { FastifyReply } from 'fastify';
import { PixiuError, RETRY_AFTER_SECONDS, unavailable } from '../errors.js';
import { binarySize } from './error-handler.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The node's {@link HistoryBudget}, shared by both history routes (decorated in app.ts). */
    historyBudget: HistoryBudget;
  }
}

/** The budget, bytes: 64 MiB, some 50 full pages (their JSON text counts twice: string and buffer). */
export const HISTORY_BYTES_IN_FLIGHT = 64 * 1024 * 1024;

/**
 * The most bytes the answers for one user's inbox hold at once, both routes together:
 * 8 MiB, an eighth of the budget: three requests of `limit=1000` in flight, each holding
 * a full page's 2 MiB and its entries while read (one answer is always taken when none
 * of the user's is held).
 */
export const HISTORY_BYTES_PER_USER = 8 * 1024 * 1024;

/**
 * How long a history answer may go untaken by default, ms (`PIXIU_HISTORY_TAKE_TIMEOUT`),
 * counted from the moment its client can start reading it (an answer pipelined behind
 * others, from when those are written out): 60 s, time enough for a full page (about
 * 1 MiB) at 20 KiB/s. A client that takes none of it (pipelining requests and never
 * reading, or gone without a FIN) would otherwise hold its share of the budget for as
 * long as its connection stays open, and a few dozen such connections would refuse
 * every other reader 503 for good. Past it the connection is closed.
 */
export const HISTORY_TAKE_TIMEOUT_MS = 60_000;

/** Bytes of history answers in flight on one node. */
export class HistoryBudget {
  readonly #limit: number;
  readonly #takeTimeoutMs: number;
  readonly #onAbandoned: (() => void) | undefined;
  /** The releases of the answers held on each connection: one 'close' listener per connection, however many are pipelined. */
  readonly #held = new WeakMap<Socket, { readonly releases: Set<() => void>; readonly onClose: () => void }>();
  #inUse = 0;
  readonly #perUser: number;
  /** What the answers for each user's inbox hold, only users with some held: bytes, and how many answers hold them. */
  readonly #byUser = new Map<string, { bytes: number; answers: number }>();

  /**
   * @param limit bytes held at most (one answer is always taken when none is held)
   * @param takeTimeoutMs how long an answer may hold its bytes once its client can read
   *   it, ms, before its connection is closed ({@link HISTORY_TAKE_TIMEOUT_MS})
   * @param onAbandoned told each connection closed for it (a metric)
   * @param perUser bytes the answers for one user's inbox hold at most ({@link HISTORY_BYTES_PER_USER})
   */
  constructor(limit = HISTORY_BYTES_IN_FLIGHT, takeTimeoutMs = HISTORY_TAKE_TIMEOUT_MS, onAbandoned?: () => void, perUser = HISTORY_BYTES_PER_USER) {
    this.#limit = limit;
    this.#takeTimeoutMs = takeTimeoutMs;
    this.#onAbandoned = onAbandoned;
    this.#perUser = perUser;
  }

  /** Bytes held now. */
  get inUse(): number {
    return this.#inUse;
  }

  /**
   * Holds `bytes` for the answer `reply` will send, until its response has been written
   * out to the connection (the response's `close`) or the connection has closed. When
   * that has not happened within the take timeout of the response getting the
   * connection (at once, or once the answers pipelined ahead of it are written), the
   * connection is closed (destroyed: its client took nothing, or too little to finish),
   * which gives back what this answer and those queued behind it held.
   * @param user whose inbox the answer is of: its answers hold at most the per-user share
   * @returns a function that changes the bytes held to its argument (once the page's
   *   size is known); it does nothing after the release
   * @throws PixiuError RATE_LIMITED (with `retryAfterSeconds`) when answers for `user` hold too much already,
   *   naming how many requests hold how much ({@link userShareHeld});
   *   UNAVAILABLE when answers in flight hold too much already
   */
  hold(reply: FastifyReply, bytes: number, user: string): (bytes: number) => void {
    const mine = this.#byUser.get(user);
    if (mine !== undefined && mine.bytes + bytes > this.#perUser) {
      throw new PixiuError('RATE_LIMITED', userShareHeld(user, mine.answers, mine.bytes, this.#perUser, bytes), { retryAfterSeconds: RETRY_AFTER_SECONDS });
    }
    if (this.#inUse > 0 && this.#inUse + bytes > this.#limit) {
      throw unavailable(`this node is busy sending history pages (${Math.round(this.#inUse / 1048576)} MiB held for pages being read or not yet taken by their clients); retry shortly`);
    }
    const connection = reply.request?.raw.socket;
    // A request pipelined behind others may run after its connection closed: it holds nothing.
    if (connection?.destroyed === true) return () => {};
    let held = 0;
    const change = (now: number): void => {
      this.#inUse += now - held;
      const theirs = this.#byUser.get(user) ?? { bytes: 0, answers: 0 };
      theirs.bytes += now - held;
      theirs.answers += Number(now > 0) - Number(held > 0);
      if (theirs.answers > 0) this.#byUser.set(user, theirs);
      else this.#byUser.delete(user);
      held = now;
    };
    change(bytes);
    const res = reply.raw;
    let deadline: NodeJS.Timeout | undefined;
    const startDeadline = (): void => {
      deadline ??= setTimeout(() => {
        if (connection === undefined || connection.destroyed) return;
        this.#onAbandoned?.();
        connection.destroy();
      }, this.#takeTimeoutMs).unref();
    };
    const release = (): void => {
      clearTimeout(deadline);
      res.off('close', release);
      res.off('socket', startDeadline);
      if (connection !== undefined) this.#forget(connection, release);
      change(0);
    };
    res.once('close', release);
    if (connection !== undefined) {
      // Node hands a pipelined response the connection ('socket') once those ahead are written.
      if (res.socket !== null && res.socket !== undefined) startDeadline();
      else res.once('socket', startDeadline);
      this.#remember(connection, release);
    }
    return (now) => {
      if (held === 0) return;
      change(now);
    };
  }

  /**
   * Adds `release` to the connection's: all run when it closes, for a response queued
   * behind others (pipelined) never closes when its connection does.
   */
  #remember(connection: Socket, release: () => void): void {
    let held = this.#held.get(connection);
    if (held === undefined) {
      const releases = new Set<() => void>();
      const onClose = (): void => {
        for (const r of [...releases]) r();
      };
      held = { releases, onClose };
      this.#held.set(connection, held);
      connection.once('close', onClose);
    }
    held.releases.add(release);
  }

  /** Removes a release that ran; the last one takes the connection's listener with it. */
  #forget(connection: Socket, release: () => void): void {
    const held = this.#held.get(connection);
    if (held === undefined) return;
    held.releases.delete(release);
    if (held.releases.size > 0) return;
    this.#held.delete(connection);
    connection.off('close', held.onClose);
  }
}

/**
 * The 429 of a user's share held: in requests, since what holds it is how many are in
 * flight at once, each holding up front what its page could come to, not how large the
 * inbox is (a newcomer's finding: "8 MiB of history pages in flight" for 64 parallel
 * `limit=1` requests of an empty inbox, whose answers were a few KiB, sent them looking
 * for a large inbox). Retry-After: the answers in flight are taken within moments by a
 * client that reads them.
 * @param answers the user's answers holding `held` bytes now
 * @param held bytes they hold
 * @param share bytes one user's answers may hold ({@link HISTORY_BYTES_PER_USER})
 * @param asked bytes the refused request would have held
 */
export function userShareHeld(user: string, answers: number, held: number, share: number, asked: number): string {
  return `user ${user} has ${answers} history ${answers === 1 ? 'request' : 'requests'} in flight on this node, holding ${binarySize(held)} of the ${binarySize(share)} one user's may hold: `
    + `each holds what its page could come to (this one: ${binarySize(asked)}) from when it is read until its client has taken the answer, however small the inbox; `
    + 'send them one at a time, reading each answer before asking for the next, or retry shortly';
}
