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

/** Bytes of history answers in flight on one node. */
export class HistoryBudget {
  readonly #limit: number;
  #inUse = 0;

  /** @param limit bytes held at most (one answer is always taken when none is held) */
  constructor(limit = HISTORY_BYTES_IN_FLIGHT) {
    this.#limit = limit;
  }

  /** Bytes held now. */
  get inUse(): number {
    return this.#inUse;
  }

  /**
   * Holds `bytes` for the answer `reply` will send, until its response has been written
   * out to the connection or the connection has closed (the response's `close`).
   * @returns a function that changes the bytes held to its argument (once the page's
   *   size is known); it does nothing after the release
   * @throws PixiuError UNAVAILABLE when answers in flight hold too much already
   */
  hold(reply: FastifyReply, bytes: number): (bytes: number) => void {
    if (this.#inUse > 0 && this.#inUse + bytes > this.#limit) {
      throw unavailable(`this node is busy sending history pages (${Math.round(this.#inUse / 1048576)} MiB not yet taken by their clients); retry shortly`);
    }
    let held = bytes;
    this.#inUse += held;
    reply.raw.once('close', () => {
      this.#inUse -= held;
      held = 0;
    });
    return (now) => {
      if (held === 0) return;
      this.#inUse += now - held;
      held = now;
    };
  }
}
