/**
 * The node's budget for history answers (`GET /v1/users/{uid}/messages`,
 * `GET /v1/me/messages`; src/api/history.ts): bytes of pages being read, or written and
 * not yet taken by their clients. A page is at most about 1 MiB, but nothing bounded how
 * many were held at once: a fresh tester's 1,500 connections, each pipelining history
 * requests and never reading the answers, held gigabytes of them and the node died out
 * of memory, with a user's own token. Past the budget a history request is answered
 * 503 UNAVAILABLE with `Retry-After`, read nothing, and the node lives.
 */
import type { FastifyReply } from 'fastify';
import { unavailable } from '../errors.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The node's {@link HistoryBudget}, shared by both history routes (decorated in app.ts). */
    historyBudget: HistoryBudget;
  }
}

/** The budget, bytes: 64 MiB, some 50 full pages (their JSON text counts twice: string and buffer). */
export const HISTORY_BYTES_IN_FLIGHT = 64 * 1024 * 1024;

/**
 * How long a history answer may go untaken by default, ms, counted from its request:
 * 60 s, time enough for a full page (about 1 MiB) at 20 KiB/s. The service passes
 * `PIXIU_REQUEST_TIMEOUT` (default the same 60 s): the time a request may take to
 * arrive is the time its answer may take to be read. A client that takes none of it
 * (pipelining requests and never reading, or gone without a FIN) would otherwise hold
 * its share of the budget for as long as its connection stays open, and a few dozen
 * such connections would refuse every other reader 503 for good. Past it the
 * connection is closed.
 */
export const HISTORY_TAKE_TIMEOUT_MS = 60_000;

/** Bytes of history answers in flight on one node. */
export class HistoryBudget {
  readonly #limit: number;
  readonly #takeTimeoutMs: number;
  #inUse = 0;
  #abandoned = 0;

  /**
   * @param limit bytes held at most (one answer is always taken when none is held)
   * @param takeTimeoutMs how long an answer may hold its bytes, ms, before its connection
   *   is closed ({@link HISTORY_TAKE_TIMEOUT_MS})
   */
  constructor(limit = HISTORY_BYTES_IN_FLIGHT, takeTimeoutMs = HISTORY_TAKE_TIMEOUT_MS) {
    this.#limit = limit;
    this.#takeTimeoutMs = takeTimeoutMs;
  }

  /** Connections closed because an answer on them went untaken past the take timeout. */
  get abandoned(): number {
    return this.#abandoned;
  }

  /** Bytes held now. */
  get inUse(): number {
    return this.#inUse;
  }

  /**
   * Holds `bytes` for the answer `reply` will send, until its response has been written
   * out to the connection (the response's `close`) or the connection has closed. When
   * that has not happened within the take timeout, the request's connection is closed
   * (destroyed: its client took nothing, or too little to finish), which gives back what
   * this answer and those queued behind it on the connection held.
   * @returns a function that changes the bytes held to its argument (once the page's
   *   size is known); it does nothing after the release
   * @throws PixiuError UNAVAILABLE when answers in flight hold too much already
   */
  hold(reply: FastifyReply, bytes: number): (bytes: number) => void {
    if (this.#inUse > 0 && this.#inUse + bytes > this.#limit) {
      throw unavailable(`this node is busy sending history pages (${Math.round(this.#inUse / 1048576)} MiB not yet taken by their clients); retry shortly`);
    }
    const connection = reply.request?.raw.socket;
    // A request pipelined behind others may run after its connection closed: it holds nothing.
    if (connection?.destroyed === true) return () => {};
    let held = bytes;
    this.#inUse += held;
    const deadline = connection === undefined ? undefined : setTimeout(() => {
      if (connection.destroyed) return;
      this.#abandoned += 1;
      connection.destroy();
    }, this.#takeTimeoutMs).unref();
    // Given back when the response closes, or when the connection does: a response queued
    // behind others on a connection (pipelined) never closes when the connection does.
    const release = (): void => {
      clearTimeout(deadline);
      reply.raw.off('close', release);
      connection?.off('close', release);
      this.#inUse -= held;
      held = 0;
    };
    reply.raw.once('close', release);
    connection?.once('close', release);
    return (now) => {
      if (held === 0) return;
      this.#inUse += now - held;
      held = now;
    };
  }
}
