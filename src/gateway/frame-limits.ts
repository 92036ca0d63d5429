/**
 * The limits on what one connection's client may send (docs/protocol.md, "Client →
 * server"); src/gateway/ws-connection.ts holds its connections to them. One past any of
 * them closes the connection 4003 (protocol abuse).
 */
import { RateLimiter } from 'limiter';

/** Malformed frames tolerated on one connection before it is closed 4003. */
export const MAX_BAD_FRAMES = 20;
/**
 * Client frames held before `welcome`, or behind a frame still being handled; one
 * more closes the connection 4003. Frames are at most `PIXIU_MAX_CLIENT_FRAME_BYTES`,
 * so this bounds a connection's held bytes (64 × 4 KiB by default).
 */
export const MAX_HELD_FRAMES = 64;

/**
 * Frames other than `ack` (`ping`, `refresh`, `sub`, `unsub`, and bad ones) one
 * connection may send per {@link CONTROL_FRAME_WINDOW_MS} (a window that starts at the
 * first of them; limiter's RateLimiter): following 100 channels and leaving them, in
 * groups of 63 with a `ping` after each as docs/protocol.md advises, is 204. Each
 * costs the node an answer or a Redis call, and a flood of valid `ping`s from four
 * connections held a node's `/healthz` for 3 s (a fresh tester's finding). `ack`s are
 * not counted: a client acks as fast as it is sent messages (refused ones have a
 * budget of their own: {@link refusedAckLimiter}); a WebSocket ping control frame
 * (answered with a pong) is counted.
 */
export const MAX_CONTROL_FRAMES = 300;
/** The window of {@link MAX_CONTROL_FRAMES}, ms. */
export const CONTROL_FRAME_WINDOW_MS = 30_000;

/** A connection's counter of frames other than `ack`. */
function controlFrameLimiter(): RateLimiter {
  return new RateLimiter({ tokensPerInterval: MAX_CONTROL_FRAMES, interval: CONTROL_FRAME_WINDOW_MS });
}

/** The close reason past the limit (close code 4003). */
export const controlFrameLimitReason = `more than ${MAX_CONTROL_FRAMES} frames other than ack in ${CONTROL_FRAME_WINDOW_MS / 1000} s`;

/**
 * Acks refused (above the last seq sent, answered with an `error` frame) one
 * connection may send per {@link CONTROL_FRAME_WINDOW_MS}: the delivery window plus
 * {@link MAX_CONTROL_FRAMES}. A well-behaved client can send a window's worth at once
 * — the acks still in flight for the old seqs when a `reset` came (no `epoch` on
 * them) —, so they are not held to the 300; a flood of them had the node answer each
 * without limit (a security tester's finding).
 * @param window `PIXIU_DELIVERY_WINDOW`, messages
 */
function refusedAckLimiter(window: number): RateLimiter {
  return new RateLimiter({ tokensPerInterval: window + MAX_CONTROL_FRAMES, interval: CONTROL_FRAME_WINDOW_MS });
}

/** The close reason past {@link refusedAckLimiter}'s budget (close code 4003). */
export function refusedAckLimitReason(window: number): string {
  return `more than ${window + MAX_CONTROL_FRAMES} acks refused in ${CONTROL_FRAME_WINDOW_MS / 1000} s`;
}

/** The close reason past {@link MAX_BAD_FRAMES} (close code 4003). */
export const badFrameLimitReason = 'too many malformed frames';

/**
 * One connection's budgets of the frames that each cost the node an answer: frames
 * other than `ack` ({@link MAX_CONTROL_FRAMES}), acks refused
 * ({@link refusedAckLimiter}) and malformed frames ({@link MAX_BAD_FRAMES}, over the
 * connection's life). Made by the first such frame (most connections send none); each
 * limiter by the first frame it counts.
 */
export class FrameBudget {
  readonly #window: number;
  #control: RateLimiter | undefined;
  #refusedAcks: RateLimiter | undefined;
  #badFrames = 0;

  /** @param window `PIXIU_DELIVERY_WINDOW`, messages */
  constructor(window: number) {
    this.#window = window;
  }

  /** Takes one frame other than `ack`. @returns the close reason (code 4003) past the budget, else undefined */
  control(): string | undefined {
    return (this.#control ??= controlFrameLimiter()).tryRemoveTokens(1) ? undefined : controlFrameLimitReason;
  }

  /** Takes one refused ack. @returns the close reason (code 4003) past the budget, else undefined */
  refusedAck(): string | undefined {
    return (this.#refusedAcks ??= refusedAckLimiter(this.#window)).tryRemoveTokens(1) ? undefined : refusedAckLimitReason(this.#window);
  }

  /** Counts one malformed frame. @returns the close reason (code 4003) past {@link MAX_BAD_FRAMES}, else undefined */
  badFrame(): string | undefined {
    this.#badFrames += 1;
    return this.#badFrames > MAX_BAD_FRAMES ? badFrameLimitReason : undefined;
  }
}
