/**
 * The bounds of one HTTP connection's pipelining (pipelining-bound.ts enforces them;
 * docs/api.md, "The OpenAPI document and what holds for every route"). A module of its
 * own, without imports: the OpenAPI document's words (schemas.ts) name the bound, and
 * pipelining-bound.ts's imports reach back to schemas.ts.
 */

/** The bounds of one connection's pipelining. */
export interface PipelineBounds {
  /**
   * Requests of one connection in progress at once: dispatched to the app, their answer
   * not yet all handed to the kernel. A request arriving with this many in progress is
   * refused 429 after their answers, and the connection then closed.
   */
  readonly maxRequests: number;
  /**
   * Bytes of answers waiting to be written on one connection (in the socket's buffer,
   * and those queued behind the answer being written): a request arriving with more
   * waiting destroys the connection at once.
   */
  readonly maxUnreadBytes: number;
}

/**
 * The node's bounds: 64 requests, 16 MiB. 64 is several times what a pipelining client
 * keeps in flight (undici's `pipelining` is 1 by default, load tools such as autocannon
 * and wrk are usually run 10 – 16 deep; browsers and curl do not pipeline),
 * and costs the node at most 64 answers' work per connection before it is closed
 * (docs/decisions.md "HTTP" has the measurement). 16 MiB is twice what one user's
 * history answers may hold (history-budget.ts `HISTORY_BYTES_PER_USER`), so a slow
 * reader asking for pages one after the other, or a producer's batch answers, stays
 * far below it.
 */
export const PIPELINE_BOUNDS: PipelineBounds = Object.freeze({ maxRequests: 64, maxUnreadBytes: 16 * 1024 * 1024 });
