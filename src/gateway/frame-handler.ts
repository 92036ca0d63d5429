/**
 * What one connection's client sends (docs/protocol.md, "Client → server"): its frames
 * (`ack`, `ping`, `refresh`, `sub`, `unsub`, and malformed ones) and its WebSocket
 * pings and pongs, each answered and held to the connection's frame budgets
 * (frame-limits.ts: one past a budget closes the connection 4003). It also keeps what a
 * `refresh` changes: the token's expiry and `channels` patterns.
 *
 * Client frames are handled one at a time, in the order they came, and none before
 * `welcome` is out (frame-queue.ts), so every answer goes out in the order of the
 * frames it answers.
 */
import type { RawData } from 'ws';
import { PixiuError } from '../errors.js';
import type { UserSession } from '../delivery/session.js';
import type { ErrorRef, FrameType } from '../delivery/frames.js';
import { CloseCode } from '../delivery/close-codes.js';
import { ConnectionChannels, type PubSink } from '../channels/connection-channels.js';
import { FrameRefused, isAckFrame, readClientFrame } from './client-frames.js';
import { channelFrame } from './channel-frames.js';
import { FrameQueue } from './frame-queue.js';
import { FrameBudget, MAX_CONTROL_FRAMES, MAX_HELD_FRAMES } from './frame-limits.js';
import { refreshedClaims } from './token-refresh.js';
import type { ConnectionDeps } from './gateway-deps.js';

/** The connection whose client frames a {@link FrameHandler} handles (ws-connection.ts `WsConnection`). */
export interface FrameConnection extends PubSink {
  readonly id: string;
  readonly user: string;
  /** Its delivery session, once attached: `ack`s move its cursors, a `ping` pulls. */
  readonly session: UserSession | undefined;
  /** Writes one text frame of type `t`. */
  send(frame: string, t: FrameType): void;
  /** Sends an `error` frame, naming the frame refused when `ref` is given. */
  sendError(err: PixiuError, ref?: ErrorRef): void;
  /** Writes a WebSocket pong control frame of `data` (RFC 6455 §5.5.3), held to the send buffer's limits. */
  pong(data: Buffer): void;
  /** Closes with a close code (4003 from here). */
  close(code: number, reason: string): void;
}

/** One connection's client frames: see the module's doc. */
export class FrameHandler {
  readonly #conn: FrameConnection;
  readonly #deps: ConnectionDeps;
  /** The JWT's `channels` patterns (replaced by a `refresh`; undefined: no claim); {@link #channels} reads them at each `sub`. */
  #channelPatterns: readonly string[] | undefined;
  #expiresAtMs: number;
  /** Made by the first `msg` sent or the first frame other than an `ack` that moved a cursor: see frame-limits.ts. */
  #budget: FrameBudget | undefined;
  /** Created by the first `sub`: most connections follow no channel. */
  #channels: ConnectionChannels | undefined;
  /** Client frames not handled yet: held until `welcome` is out, and behind a `sub`/`unsub`/`refresh` in progress. */
  readonly #frames = new FrameQueue<{ readonly data: RawData; readonly isBinary: boolean }>(
    MAX_HELD_FRAMES, (f) => this.#handle(f.data, f.isBinary), (f) => !f.isBinary && isAckFrame(f.data.toString()));

  /**
   * @param token the JWT's `channels` patterns and its expiry, ms since the epoch, as
   *   the connection opened
   */
  constructor(conn: FrameConnection, deps: ConnectionDeps, token: { readonly channels: readonly string[] | undefined; readonly expiresAtMs: number }) {
    this.#conn = conn;
    this.#deps = deps;
    this.#channelPatterns = token.channels;
    this.#expiresAtMs = token.expiresAtMs;
  }

  /** When the token expires, ms since the epoch: a `refresh` may move it later. */
  get expiresAtMs(): number {
    return this.#expiresAtMs;
  }

  /** A client frame came, on an open connection: handled in turn; one more than {@link MAX_HELD_FRAMES} held closes 4003. */
  message(data: RawData, isBinary: boolean): void {
    if (!this.#frames.push({ data, isBinary })) this.#conn.close(CloseCode.protocolAbuse, `more than ${MAX_HELD_FRAMES} frames sent ahead of their answers`);
  }

  /**
   * A WebSocket ping (RFC 6455 §5.5.2), on an open connection: answered with a pong of
   * its data (§5.5.3); it counts as a frame other than `ack` ({@link MAX_CONTROL_FRAMES}, then 4003).
   */
  ping(data: Buffer): void {
    if (this.#charge('control')) this.#conn.pong(data);
  }

  /** A WebSocket pong the server did not ask for, on an open connection: it counts as a frame other than `ack` ({@link MAX_CONTROL_FRAMES}, then 4003). */
  unsolicitedPong(): void {
    this.#charge('control');
  }

  /** A `msg` frame went to the client: one more ack that moves nothing is allowed (frame-limits.ts). */
  msgSent(): void {
    this.#frameBudget().earn();
  }

  /** `welcome` is out: the frames held so far are handled, and the next as they come. */
  open(): void {
    this.#frames.open();
  }

  /** Drops the frames held and handles no more (the connection is closing). */
  stop(): void {
    this.#frames.stop();
  }

  /** The connection closed: leaves its channels. */
  closeChannels(): void {
    void this.#channels?.closeAll();
  }

  /**
   * Takes from the connection's {@link FrameBudget} (frame-limits.ts); past it, closes the connection 4003.
   * @returns false when the connection was closed
   */
  #charge(kind: 'control' | 'idleAck' | 'badFrame'): boolean {
    const reason = this.#frameBudget()[kind]();
    if (reason === undefined) return true;
    this.#conn.close(CloseCode.protocolAbuse, reason);
    return false;
  }

  /** The connection's {@link FrameBudget}, made by its first `msg` or first frame that costs. */
  #frameBudget(): FrameBudget {
    return (this.#budget ??= FrameBudget.of(this.#deps.config));
  }

  /**
   * Handles one client frame.
   * @returns a promise (never rejecting) when its answer waits on Redis or the key source; the next frame waits for it
   */
  #handle(data: RawData, isBinary: boolean): Promise<void> | undefined {
    const frame = readClientFrame(data, isBinary);
    // Frames other than acks, bad ones included, are held to MAX_CONTROL_FRAMES.
    if ((frame instanceof PixiuError || frame.t !== 'ack') && !this.#charge('control')) return undefined;
    if (frame instanceof PixiuError) {
      this.#refuse(frame);
      return undefined;
    }
    switch (frame.t) {
      case 'ack':
        // One that moves no cursor (refused, a repeat, another epoch's) has a budget (frame-limits.ts).
        if ((this.#conn.session?.ack(this.#conn.id, frame.seq, frame.epoch) ?? 'idle') !== 'moved') this.#charge('idleAck');
        return undefined;
      case 'ping':
        this.#conn.send('{"t":"pong"}', 'pong');
        this.#conn.session?.heartbeat();
        return undefined;
      case 'refresh':
        return this.#refresh(frame.token);
      case 'sub':
      case 'unsub':
        return channelFrame(frame, this.#connectionChannels(), {
          sendError: (err, ref) => this.#conn.sendError(err, ref),
          refuse: (err, ref) => this.#refuse(err, ref),
        });
    }
  }

  /** The connection's channels, made by its first `sub` or `unsub`; undefined when this service has none. */
  #connectionChannels(): ConnectionChannels | undefined {
    const deps = this.#deps.channels;
    return deps && (this.#channels ??= new ConnectionChannels(deps, () => this.#channelPatterns, this.#conn));
  }

  /** Answers a malformed frame (`ref`: by default the one a FrameRefused names); too many close the connection 4003 (protocol abuse). */
  #refuse(err: PixiuError, ref = err instanceof FrameRefused ? err.ref : undefined): void {
    if (this.#charge('badFrame')) this.#conn.sendError(err, ref);
  }

  /**
   * `refresh`: the new token's expiry and channels, or an error frame (token-refresh.ts);
   * channels it no longer allows are dropped, each with an `error` (dropDisallowed).
   */
  async #refresh(token: string): Promise<void> {
    const claims = await refreshedClaims(this.#deps.verify, token, { user: this.#conn.user, expiresAtMs: this.#expiresAtMs })
      .catch((err: unknown) => void this.#conn.sendError(err as PixiuError, { t: 'refresh' }));
    if (claims === undefined) return;
    this.#channelPatterns = claims.channels;
    this.#expiresAtMs = claims.expiresAtMs;
    await this.#channels?.dropDisallowed((err, channel) => this.#conn.sendError(err, { t: 'sub', channel }));
  }
}
