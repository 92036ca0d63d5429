/**
 * The limits on what one connection's client may send (docs/protocol.md, "Client →
 * server"); src/gateway/frame-handler.ts holds its connections to them. One past any of
 * them closes the connection 4003 (protocol abuse).
 */

/** Malformed frames tolerated on one connection before it is closed 4003. */
export const MAX_BAD_FRAMES = 20;
/**
 * Client frames held before `welcome`, or behind a frame still being handled; one
 * more closes the connection 4003. Frames are at most `PIXIU_MAX_CLIENT_FRAME_BYTES`,
 * so this bounds a connection's held bytes (64 × 4 KiB by default).
 */
export const MAX_HELD_FRAMES = 64;

/**
 * Most bytes read (and dropped unparsed) from a client after its connection was closed
 * 4003, during the close's grace; one more cuts the connection (receiver-refusals.ts
 * `dropClientBytes`). {@link MAX_HELD_FRAMES} frames of the largest size a client may
 * send, 256 KiB by default: what the server ever holds of a client's frames, so what a
 * client within the limits may have sent ahead of their answers when the close reached
 * it (acks, never held, are a few dozen bytes each: a window's worth is a few KiB). A
 * client that writes on past it is not finishing what it had sent, and is not read for
 * the rest of the grace: it may then miss the close frame (a reset), which a 4003 risks.
 * @param maxClientFrameBytes `PIXIU_MAX_CLIENT_FRAME_BYTES`
 */
export function abuseDropBytes(maxClientFrameBytes: number): number {
  return MAX_HELD_FRAMES * maxClientFrameBytes;
}

/**
 * Frames other than `ack` (`ping`, `refresh`, `sub`, `unsub`, and bad ones) one
 * connection may send per {@link CONTROL_FRAME_WINDOW_MS}: a window that starts at the
 * first of them, and the next at the first frame after it ends ({@link FrameWindow}). Following 100 channels and leaving them, in
 * groups of 63 with a `ping` after each as docs/protocol.md advises, is 204. Each
 * costs the node an answer or a Redis call, and a flood of valid `ping`s from four
 * connections held a node's `/healthz` for 3 s (a fresh tester's finding). WebSocket
 * ping control frames (answered with a pong) are counted, and so are pong control
 * frames the server did not ask for (a browser sends one per server ping, every 25 s;
 * a flood of unsolicited pongs held the node, a hostile-input newcomer's finding).
 * `ack`s are not: a client acks as fast as it is sent messages (those that move no
 * cursor have a budget of their own: {@link idleAckAllowance}).
 */
export const MAX_CONTROL_FRAMES = 300;
/** The time in which a budget's whole allowance comes back, ms. */
export const CONTROL_FRAME_WINDOW_MS = 30_000;

/**
 * A count of frames in a window of {@link CONTROL_FRAME_WINDOW_MS} that starts at the
 * first frame, the next window at the first frame after it ends: `size` pass in each,
 * the rest are refused. The rule docs/protocol.md gives clients. Not limiter's
 * RateLimiter, which this module used first: it is such a window *and* a token bucket
 * refilled at `size` per window, so a frame at 0 s and 299 at 28 s left only ~30 of
 * the next window's 300 at 31 s — a limit no client could plan for from the docs (a
 * verifying newcomer's finding, medium). Ten lines, so no library.
 */
export class FrameWindow {
  readonly #size: number;
  #start = Number.NEGATIVE_INFINITY;
  #count = 0;

  /**
   * @param size frames that pass per window; unbounded (the default), every frame passes
   *   and is counted, for a caller that judges {@link count} itself
   */
  constructor(size = Number.POSITIVE_INFINITY) {
    this.#size = size;
  }

  /** Frames counted in the window begun last (refused ones not included): 1 right after a take that began one. */
  get count(): number {
    return this.#count;
  }

  /** Counts one frame. @returns false when the window already holds `size` (clock: `performance.now`) */
  take(): boolean {
    const now = performance.now();
    if (now - this.#start >= CONTROL_FRAME_WINDOW_MS) {
      this.#start = now;
      this.#count = 0;
    }
    if (this.#count >= this.#size) return false;
    this.#count += 1;
    return true;
  }
}

/** The close reason past the limit (close code 4003). */
export const controlFrameLimitReason = `more than ${MAX_CONTROL_FRAMES} frames other than ack in ${CONTROL_FRAME_WINDOW_MS / 1000} s`;

/**
 * Acks that move nothing one connection may send per {@link CONTROL_FRAME_WINDOW_MS}
 * (a {@link FrameWindow}), beyond one for each `msg` frame it was sent (a client may
 * ack a message twice, on receipt and once handled; {@link FrameBudget.earn}): the delivery window once for each time a window can reach the client — sent, then
 * resent by each redelivery round — plus {@link MAX_CONTROL_FRAMES}; 700 with the
 * defaults (window 100, three rounds). They are the acks refused (above the last seq
 * sent, answered with an `error` frame) and those that move no cursor: at or below
 * what the device already acked on this connection (a repeat), or naming another epoch
 * than the inbox's (machine.ts `ack`). An ack that moves the connection's cursor, or
 * the device's stored one, is free: each seq does so once, so they are bounded by what
 * was sent. A well-behaved client sends the others in bursts of at most a window — the
 * acks in flight for the old seqs when a `reset` came, the acks of each redelivered
 * copy of a window it acked late (all rounds fall within 30 s with the default
 * timings) —, so they are not held to the 300; a flood of refused acks had the node
 * answer each without limit (a security tester's finding), and a flood of
 * `{"t":"ack","seq":0}` from one user's 5 connections held every producer's POSTs for
 * seconds (a hostile-input newcomer's finding, high).
 * @param window `PIXIU_DELIVERY_WINDOW`, messages
 * @param redeliveryRounds the rounds before 4008: `PIXIU_REDELIVERY_BACKOFF`'s length
 * @returns acks per {@link CONTROL_FRAME_WINDOW_MS}
 */
export function idleAckAllowance(window: number, redeliveryRounds: number): number {
  return window * (1 + redeliveryRounds) + MAX_CONTROL_FRAMES;
}

/**
 * The close reason past a budget of `allowance` acks that move nothing (close code
 * 4003), with the limit applied: `allowance` plus `earned`, the acks the connection's
 * `msg` frames allowed that it spent in those 30 s (the walk14 tester's F4: after 100
 * msgs the 801st closed the connection, and the reason said 700). Under 90 bytes
 * with numbers of up to 8 digits: within a close frame's 123.
 */
export function idleAckLimitReason(allowance: number, earned = 0): string {
  const seconds = CONTROL_FRAME_WINDOW_MS / 1000;
  if (earned === 0) return `more than ${allowance} acks that moved no cursor in ${seconds} s`;
  return `more than ${allowance + earned} acks that moved no cursor in ${seconds} s (${allowance} + ${earned} for msgs sent)`;
}

/** The close reason past {@link MAX_BAD_FRAMES} (close code 4003). */
export const badFrameLimitReason = 'too many malformed frames';

/**
 * One connection's budgets of the frames that cost the node work without moving a
 * cursor: frames other than `ack` ({@link MAX_CONTROL_FRAMES}), acks that move no
 * cursor, refused ones included ({@link idleAckAllowance}), and malformed frames
 * ({@link MAX_BAD_FRAMES}, over the connection's life). Made by the connection's first
 * `msg` or first such frame (an idle connection has none); each window by the first
 * frame it counts.
 */
export class FrameBudget {
  readonly #idleAckAllowance: number;
  readonly #mostEarned: number;
  #control: FrameWindow | undefined;
  /** Every ack that moves nothing, earned or not: one window, begun at the first of them. */
  #idleAcks: FrameWindow | undefined;
  /** Acks that move nothing allowed by `msg` frames sent since this budget was made, at most `mostEarned`. */
  #earned = 0;
  /** Of {@link #idleAcks}' current window, the acks the `msg` frames paid for (the rest spend the allowance). */
  #earnedInWindow = 0;
  #badFrames = 0;

  /**
   * @param idleAckAllowance acks that move nothing per 30 s ({@link idleAckAllowance})
   * @param mostEarned most second acks held unspent: `PIXIU_INBOX_CAP` plus the
   *   allowance, so that a client acking a whole retained inbox on receipt and again
   *   once handled, handling far slower than it receives, keeps every one (a reviewer's
   *   finding: at the allowance alone a 10,000 backlog handled at 100/s was closed at 19 s)
   */
  constructor(idleAckAllowance: number, mostEarned: number = idleAckAllowance) {
    this.#idleAckAllowance = idleAckAllowance;
    this.#mostEarned = mostEarned;
  }

  /**
   * A connection's budget under the node's settings: the allowance of
   * {@link idleAckAllowance}, and at most `PIXIU_INBOX_CAP` plus it earned.
   */
  static of(config: { readonly deliveryWindow: number; readonly redeliveryBackoffMs: readonly number[]; readonly inboxCap: number }): FrameBudget {
    const allowance = idleAckAllowance(config.deliveryWindow, config.redeliveryBackoffMs.length);
    return new FrameBudget(allowance, config.inboxCap + allowance);
  }

  /** Takes one frame other than `ack`. @returns the close reason (code 4003) past the budget, else undefined */
  control(): string | undefined {
    return (this.#control ??= new FrameWindow(MAX_CONTROL_FRAMES)).take() ? undefined : controlFrameLimitReason;
  }

  /** Takes one ack that moved no cursor (refused, a repeat, another epoch's). @returns the close reason (code 4003) past the budget, else undefined */
  idleAck(): string | undefined {
    // Counted whatever becomes of it (a refused one too: past the allowance it stays past
    // it); a count of 1 is a window begun by this ack.
    const acks = (this.#idleAcks ??= new FrameWindow());
    acks.take();
    if (acks.count === 1) this.#earnedInWindow = 0;
    if (this.#earned > 0) {
      this.#earned -= 1;
      this.#earnedInWindow += 1;
      return undefined;
    }
    if (acks.count - this.#earnedInWindow <= this.#idleAckAllowance) return undefined;
    return idleAckLimitReason(this.#idleAckAllowance, this.#earnedInWindow);
  }

  /**
   * A `msg` frame went to the client: one more ack that moves nothing is allowed (its
   * second ack), at most `mostEarned` held at once.
   */
  earn(): void {
    if (this.#earned < this.#mostEarned) this.#earned += 1;
  }

  /** Counts one malformed frame. @returns the close reason (code 4003) past {@link MAX_BAD_FRAMES}, else undefined */
  badFrame(): string | undefined {
    this.#badFrames += 1;
    return this.#badFrames > MAX_BAD_FRAMES ? badFrameLimitReason : undefined;
  }
}
