/**
 * What bench:e2e's coordinator (bench/e2e.ts) and its load process
 * (bench/lib/e2e-load.ts) say to each other over the child-process IPC channel: one
 * command at a time, each answered once, by id.
 */

/** Which server a pool of connections talks to. */
export type TargetKind = 'pixiu' | 'bare';

/** Commands, by `op`. */
export type LoadCommand =
  /**
   * Opens `count` connections, one per user `<prefix>0 … <prefix>(count-1)`, device
   * `d1`, at most `concurrency` handshakes at once; resolves when each has its
   * `welcome`. Pixiu users get an HS256 token minted with `jwtSecret`.
   */
  | { op: 'connect'; pool: string; kind: TargetKind; url: string; prefix: string; count: number; concurrency: number; jwtSecret: string }
  /** Closes every connection of a pool and waits for the closes. */
  | { op: 'close'; pool: string }
  /**
   * One open-loop step of live delivery: POSTs `rate` single messages per second for
   * `seconds` to random users of `pool`, then waits for the deliveries.
   */
  | { op: 'step'; pool: string; postUrl: string; apiToken: string; rate: number; seconds: number; graceMs: number }
  /** Catch-up: connects `user` (no last_seq), acks every msg, times until seq `expect`. */
  | { op: 'catchup'; url: string; user: string; expect: number; jwtSecret: string; timeoutMs: number };

/** What `connect` answers. */
export interface ConnectResult {
  readonly opened: number;
  readonly failed: number;
  /** The first failure's message, if any. */
  readonly firstError?: string;
  readonly ms: number;
}

/** Percentiles of one latency sample, ms. */
export interface LatencySummary {
  readonly count: number;
  readonly p50: number;
  readonly p99: number;
  readonly p999: number;
  readonly max: number;
}

/** What one live-delivery `step` measured. */
export interface StepResult {
  readonly rate: number;
  readonly seconds: number;
  /** POSTs issued (the step's messages). */
  readonly issued: number;
  /** POSTs answered 2xx / otherwise (status or network error). */
  readonly postOk: number;
  readonly postFailed: number;
  /** POSTs dropped unsent at the end of an overloaded step (see e2e-load.ts SHED_BACKLOG_S). */
  readonly shed: number;
  readonly firstPostError?: string;
  /** When the last POST of the step was issued, ms after its start (lag of the producer). */
  readonly issueSpanMs: number;
  /** Messages of the step received during the step's window (start … start + seconds). */
  readonly deliveredInWindow: number;
  /** Messages of the step received within `graceMs` after the window. */
  readonly deliveredInGrace: number;
  /** Messages of the step received in all (the step also waits for stragglers). */
  readonly deliveredTotal: number;
  /** Frames marked `redelivered`, and `gap` frames, seen during the step. */
  readonly redelivered: number;
  readonly gaps: number;
  /** POST send time → the client's receipt of the frame. */
  readonly latency: LatencySummary;
  /** POST send time → its HTTP answer. */
  readonly postLatency: LatencySummary;
  readonly wallMs: number;
}

/** What `catchup` measured. */
export interface CatchupResult {
  /** From the connect call to the receipt of seq `expect`, ms. */
  readonly ms: number;
  /** From the connect call to `welcome`, ms. */
  readonly welcomeMs: number;
  readonly msgs: number;
  readonly gaps: number;
  readonly redelivered: number;
  /** Seqs received out of order or twice. */
  readonly outOfOrder: number;
}

/** Results by command. */
export interface LoadResults {
  connect: ConnectResult;
  close: { readonly closed: number };
  step: StepResult;
  catchup: CatchupResult;
}

/** A command with its request id. */
export type LoadRequest = LoadCommand & { readonly id: number };

/** The answer to request `id`. */
export type LoadReply =
  | { readonly id: number; readonly ok: true; readonly result: LoadResults[LoadCommand['op']] }
  | { readonly id: number; readonly ok: false; readonly error: string };
