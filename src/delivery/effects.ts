/**
 * The contract between the delivery machine (machine.ts) and its driver (session.ts):
 * the machine's settings and the effects it asks the driver to perform (DESIGN.md §5).
 */
import type { InboxPage } from '../inbox/inbox.js';
import type { ReadRecord } from '../store/message-store.js';
import type { ServerFrame } from './frames.js';

/**
 * Most inbox entries read per fetch, whatever the window. Every entry of a page is
 * written in one synchronous run, and backpressure (DESIGN.md §5) can only stop a
 * connection between runs: with a page as large as a big window (up to 10,000), one
 * run of ~1 KiB messages put ~10 MiB in a socket buffer past its high-water mark. 100
 * entries bound a run's overshoot; the machine asks for the next page when one ends.
 */
export const DEFAULT_PAGE_MAX = 100;

/** Settings of a machine (DESIGN.md §10). */
export interface MachineConfig {
  /** Unacked messages per connection. */
  readonly window: number;
  /** Time without ack progress before the first redelivery, ms. */
  readonly ackTimeoutMs: number;
  /** Waits after each redelivery round, ms; after the last one, close 4008. */
  readonly backoffMs: readonly number[];
  /** Server heartbeat interval, ms (shown in `welcome`, in whole seconds, at least 1). */
  readonly heartbeatMs: number;
  /** Most entries per fetch; default {@link DEFAULT_PAGE_MAX}. */
  readonly pageMax?: number;
  /**
   * The clock a message's expiry is judged by when it is sent, ms since the epoch;
   * default `Date.now`, what the store's reads judge by. Content read ahead can wait for
   * a window to free up past its `expiresAt`: it then goes out as an `expired` gap, as a
   * read at that moment would have it (connection-state.ts `deliverPage`).
   */
  readonly now?: () => number;
}

/** What the driver must do. */
export type Effect =
  /**
   * Read up to `limit` inbox entries after `afterSeq`, with their content; answer with
   * `fetched` or `fetchFailed`. With `offered`, nothing is read: it is an offered
   * append whose delivery waits for a turn of the event loop with room (machine.ts
   * `offer`, send-turns.ts), and `fetched(offered.page, offered.records)` is the answer,
   * given in that turn (never `fetchFailed`).
   */
  | { readonly kind: 'fetch'; readonly afterSeq: number; readonly limit: number; readonly offered?: { readonly page: InboxPage; readonly records: readonly ReadRecord[] } }
  /**
   * Write a frame on a connection. `live`: a `msg` sent on it for the first time whose
   * seq came after the connection's `welcome` or last `reset` (appended while it was
   * connected; connection-state.ts `liveAfter`), not catch-up nor a redelivery: the
   * driver times it (`pixiu_delivery_lag_seconds`).
   */
  | { readonly kind: 'send'; readonly conn: string; readonly frame: ServerFrame; readonly live?: true }
  /** Persist `device`'s ack cursor (coalesced by the driver; it only ever grows). */
  | { readonly kind: 'ack'; readonly device: string; readonly seq: number; readonly epoch: string | undefined }
  /** (Re)arm the connection's redelivery timer; `delayMs` null cancels it. On expiry call `redeliveryDue`. */
  | { readonly kind: 'timer'; readonly conn: string; readonly delayMs: number | null }
  /** Close a connection. */
  | { readonly kind: 'close'; readonly conn: string; readonly code: number; readonly reason: string }
  /**
   * A page to the connection was cut at its byte allowance ({@link ByteRoom}): the
   * machine counts it paused; once the frames written drain, the driver calls `drain`
   * and the rest of the page follows (connection-state.ts `deliverPage`). `byBudget`:
   * that allowance's {@link PageAllowance.byBudget}, as it was when the page was built.
   */
  | { readonly kind: 'hold'; readonly conn: string; readonly byBudget: boolean }
  /**
   * Give the inbox a new epoch if it is still `epoch` (Inbox.rotateEpoch): it came back
   * from Redis with less than a connection was sent (DESIGN.md §11). Answer with
   * `epochRotated` and its {@link RotationOutcome}, whether it worked or not; no fetch
   * starts until then. `cause`: `delivered` when this node sent
   * seqs the inbox no longer has (or an append reuses one), never refused; `resume`
   * when a connecting device's `last_seq` is above the inbox's latest under its epoch,
   * which a client's wrong `last_seq` also looks like: at most one such rotation per
   * user per cool-down (epoch-guard.ts RESUME_ROTATION_COOLDOWN_MS, rotate-7.lua).
   * `readLatest`, for a `resume` one: the latest seq of the read that showed the claim,
   * which bounds the seq the new epoch's lineage goes on from (Inbox.rotateEpoch).
   */
  | { readonly kind: 'rotate-epoch'; readonly epoch: string; readonly cause: RotationCause; readonly readLatest?: number };

/**
 * How many bytes of frames a connection may be written now before its delivery waits
 * for them to drain (the gateway's: its high-water mark, or the node budget's floor
 * while the node is at its budget, less what its socket holds: ws-connection.ts). A
 * page to it stops at the message whose frames reach it; the first always goes.
 */
export interface ByteRoom {
  /** Read when a page to the connection is built. */
  byteAllowance(): PageAllowance;
}

/**
 * What a page to a connection may write ({@link ByteRoom}), and why it is that much:
 * the machine is given it as data and hands the reason back on the page's `hold`, so
 * that a pause is put down to what set its allowance, not to the node's state when
 * the page's frames were written (review35 2).
 */
export interface PageAllowance {
  /** Bytes of `msg` and `gap` frames; 0 or less: one message, then wait. */
  readonly bytes: number;
  /**
   * The bytes are the node budget's floor (the node was at its budget), not the
   * connection's high-water mark: a page cut at them is the budget's pause
   * (src/gateway/buffer-budget.ts `paused`).
   */
  readonly byBudget: boolean;
}

/** Why a `rotate-epoch` is asked for (see {@link Effect}). */
export type RotationCause = 'delivered' | 'resume';

/**
 * How a `rotate-epoch` ended: `made` (the inbox has another epoch now, given here or
 * by another node first), `kept` (Redis refused a `resume` one for its cool-down: the
 * epoch stays), `failed` (the call threw: Redis down, a command timeout; nothing is
 * known of Redis's side). A `failed` one the node's deliveries proved is asked for
 * again (epoch-guard.ts).
 */
export type RotationOutcome = 'made' | 'kept' | 'failed';

/**
 * What a client's ack did (the gateway holds the acks that move nothing to a budget,
 * src/gateway/frame-limits.ts): `moved` the connection's cursor or the device's stored
 * one; `refused` (above the last seq sent, or before `welcome`: answered with an
 * `error` frame); `idle`: nothing (at or below what the device acked on this
 * connection, another epoch's, or a connection the machine no longer holds).
 */
export type AckOutcome = 'moved' | 'refused' | 'idle';

/** The {@link AckOutcome} of the machine's effects for one ack (machine.ts `ack`). */
export function ackOutcome(effects: readonly Effect[]): AckOutcome {
  if (effects.length === 0) return 'idle';
  // The machine's only answer to an ack is the error frame of one it refused; any
  // other ack it acts on stores a cursor.
  return effects.some((e) => e.kind === 'send' && e.frame.t === 'error') ? 'refused' : 'moved';
}
