/**
 * What one connection's client sends (docs/protocol.md, "Client → server"): its frames
 * (`ack`, `ping`, `refresh`, `sub`, `unsub`, and malformed ones) and its WebSocket
 * pings and pongs, each answered and held to the connection's frame budgets
 * (frame-limits.ts: one past a budget closes the connection 4003). It also keeps what a
 * `refresh` changes: the token's expiry and `channels` patterns.
 *
 * Client frames are handled one at a time, in the order they came, and none before
 * `welcome` is out (frame-queue.ts), so every answer goes out in the order of the
 * frames it answers. Two things overtake that order, neither with an answer of its
 * own: an `ack` is applied on arrival (frame-queue.ts), and a `refresh`'s token is
 * verified on arrival, a valid one (same user) keeping the connection open to its
 * `exp` at once — else a `refresh` sent in time behind a `sub` whose catch-up waits
 * on backpressure was closed 4001 at the old `exp`. The `refresh` is answered (its
 * `error`, or the channels it drops) and its `channels` take effect in its turn.
 */
import type { RawData } from 'ws';
import { PixiuError } from '../errors.js';
import type { UserSession } from '../delivery/session.js';
import type { ClientClaims } from '../auth/jwt.js';
import type { ErrorRef, FrameType } from '../delivery/frames.js';
import { CloseCode } from '../delivery/close-codes.js';
import { ConnectionChannels, type PubSink } from '../channels/connection-channels.js';
import { FrameRefused, isAckFrame, readClientFrame, refreshFrameToken } from './client-frames.js';
import { channelFrame, SUB_FAILED_LOG } from './channel-frames.js';
import { thinnedFields } from '../log-throttle.js';
import type { WrongTypeKeys } from '../redis/wrong-type.js';
import { FrameQueue } from './frame-queue.js';
import { FrameBudget, MAX_CONTROL_FRAMES, MAX_HELD_FRAMES } from './frame-limits.js';
import { refreshRefusal, verifyRefresh } from './token-refresh.js';
import type { ConnectionDeps } from './gateway-deps.js';

/** The connection whose client frames a {@link FrameHandler} handles (ws-connection.ts `WsConnection`). */
export interface FrameConnection extends PubSink {
  readonly id: string;
  readonly user: string;
  /** Its delivery session, once attached: `ack`s move its cursors, a `ping` pulls. */
  readonly session: UserSession | undefined;
  /** Writes one text frame of type `t`; answers whether it did (false once closed). */
  send(frame: string, t: FrameType): boolean;
  /** Sends an `error` frame, naming the frame refused when `ref` is given. */
  sendError(err: PixiuError, ref?: ErrorRef): void;
  /** Writes a WebSocket pong control frame of `data` (RFC 6455 §5.5.3), held to the send buffer's limits. */
  pong(data: Buffer): void;
  /** Closes with a close code (4003 from here). */
  close(code: number, reason: string): void;
}

/** A client frame held in the queue; a `refresh`'s with its token's verification, started on arrival. */
interface HeldFrame {
  readonly data: RawData;
  readonly isBinary: boolean;
  readonly verifying?: Promise<ClientClaims | PixiuError> | undefined;
}

/** An `ack` frame: it overtakes the frames held ahead of it (frame-queue.ts). */
function isHeldAck(f: HeldFrame): boolean {
  return !f.isBinary && isAckFrame(f.data.toString());
}

/** One connection's client frames: see the module's doc. */
export class FrameHandler {
  readonly #conn: FrameConnection;
  readonly #deps: ConnectionDeps;
  /** The JWT's `channels` patterns (replaced by a `refresh`; undefined: no claim); {@link #channels} reads them at each `sub`. */
  #channelPatterns: readonly string[] | undefined;
  /** When the token in force expires, ms since the epoch: the connection's, or the last `refresh` answered. */
  #expiresAtMs: number;
  /**
   * The latest `exp` of a `refresh` for this user verified on arrival, ms since the
   * epoch (0: none): the connection lives to it also before the frame is answered.
   */
  #verifiedExpiresAtMs = 0;
  /** Made by the first `msg` sent or the first frame other than an `ack` that moved a cursor: see frame-limits.ts. */
  #budget: FrameBudget | undefined;
  /** Created by the first `sub`: most connections follow no channel. */
  #channels: ConnectionChannels | undefined;
  /**
   * Client frames not handled yet: held until `welcome` is out, and behind a
   * `sub`/`unsub`/`refresh` in progress. Made by the first frame ({@link #queue}): an
   * idle connection sends none, and the queue with its handler cost each ~270 bytes of
   * heap (bench/README.md, 2026-12-05 memtrim). Until then, what a queue made now
   * starts as: `held` (before `welcome`), `open`, or `stopped` (the connection closing).
   */
  #frames: FrameQueue<HeldFrame> | 'held' | 'open' | 'stopped' = 'held';

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

  /**
   * When the connection's token expires (it is then closed 4001), ms since the epoch:
   * a `refresh` moves it later as soon as its token is verified, before its turn.
   */
  get expiresAtMs(): number {
    return Math.max(this.#expiresAtMs, this.#verifiedExpiresAtMs);
  }

  /**
   * A client frame came, on an open connection: handled in turn (a `refresh`'s token is
   * verified at once); one more than {@link MAX_HELD_FRAMES} held closes 4003.
   */
  message(data: RawData, isBinary: boolean): void {
    const token = isBinary ? undefined : refreshFrameToken(data);
    const verifying = token === undefined ? undefined : this.#verifyOnArrival(token);
    if (!this.#queue().push({ data, isBinary, verifying })) this.#conn.close(CloseCode.protocolAbuse, `more than ${MAX_HELD_FRAMES} frames sent ahead of their answers`);
  }

  /**
   * Verifies a `refresh`'s token as the frame arrives: one for this user moves
   * {@link expiresAtMs} to its `exp` if later, while the frames ahead of it are still
   * handled. What else it changes, and its answer, wait for its turn ({@link #refresh}).
   * @returns the verification, never rejecting, for its turn to take
   */
  #verifyOnArrival(token: string): Promise<ClientClaims | PixiuError> {
    const verifying = verifyRefresh(this.#deps.verify, token);
    void verifying.then((claims) => {
      if (claims instanceof PixiuError || refreshRefusal(claims, { user: this.#conn.user, expiresAtMs: this.expiresAtMs }) !== undefined) return;
      this.#verifiedExpiresAtMs = claims.expiresAtMs;
    });
    return verifying;
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
    if (this.#frames === 'held') this.#frames = 'open';
    else if (typeof this.#frames !== 'string') this.#frames.open();
  }

  /** Drops the frames held and handles no more (the connection is closing). */
  stop(): void {
    if (typeof this.#frames === 'string') this.#frames = 'stopped';
    else this.#frames.stop();
  }

  /** The client frames' queue, made as {@link #frames} says on first use. */
  #queue(): FrameQueue<HeldFrame> {
    const state = this.#frames;
    if (typeof state !== 'string') return state;
    const queue = new FrameQueue<HeldFrame>(MAX_HELD_FRAMES, (f) => this.#handle(f), isHeldAck);
    if (state === 'open') queue.open();
    else if (state === 'stopped') queue.stop();
    this.#frames = queue;
    return queue;
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
  #handle({ data, isBinary, verifying }: HeldFrame): Promise<void> | undefined {
    const frame = readClientFrame(data, isBinary);
    // Frames other than acks, bad ones included, are held to MAX_CONTROL_FRAMES.
    if ((frame instanceof PixiuError || frame.t !== 'ack') && !this.#charge('control')) return undefined;
    if (frame instanceof PixiuError) {
      this.#refuse(frame);
      return undefined;
    }
    switch (frame.t) {
      case 'ack': {
        const outcome = this.#conn.session?.ack(this.#conn.id, frame.seq, frame.epoch) ?? 'idle';
        this.#deps.onAck?.(outcome);
        // One that moves no cursor (refused, a repeat, another epoch's) has a budget (frame-limits.ts).
        if (outcome !== 'moved') this.#charge('idleAck');
        return undefined;
      }
      case 'ping':
        this.#conn.send('{"t":"pong"}', 'pong');
        this.#conn.session?.heartbeat();
        return undefined;
      case 'refresh':
        return this.#refresh(frame.token, verifying);
      case 'sub':
      case 'unsub':
        return channelFrame(frame, this.#connectionChannels(), {
          sendError: (err, ref) => this.#conn.sendError(err, ref),
          refuse: (err, ref) => this.#refuse(err, ref),
          logWrongType: (err, channel) => this.#logSubFailure(err, channel),
        });
    }
  }

  /**
   * Logs a `sub` a channel key of the wrong type failed: at error with the key
   * (src/redis/wrong-type.ts), thinned across the node's connections (the others at
   * debug), as a broadcast catch-up on a wrong-type stream is (ws-connection.ts).
   */
  #logSubFailure(err: PixiuError & { readonly cause: WrongTypeKeys }, channel: string): void {
    const fields = { conn: this.#conn.id, user: this.#conn.user, channel, err: err.cause, reason: err.message, code: err.code };
    const left = this.#deps.channels?.subFailureLog.take();
    if (left === undefined) this.#deps.logger.debug(fields, SUB_FAILED_LOG);
    else this.#deps.logger.error({ ...fields, ...thinnedFields(left) }, SUB_FAILED_LOG);
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
   * `refresh`, in its turn: the new token's expiry and channels, or an error frame
   * (token-refresh.ts); channels it no longer allows are dropped, each with an `error`
   * (dropDisallowed). Compared with the token in force now, as if verified now.
   * @param verifying its token's verification, started on arrival ({@link #verifyOnArrival});
   *   by default, started now
   */
  async #refresh(token: string, verifying = verifyRefresh(this.#deps.verify, token)): Promise<void> {
    const claims = await verifying;
    if (claims instanceof PixiuError) {
      this.#conn.sendError(claims, { t: 'refresh' });
      return;
    }
    const refusal = refreshRefusal(claims, { user: this.#conn.user, expiresAtMs: this.#expiresAtMs });
    if (refusal !== undefined) {
      this.#conn.sendError(refusal, { t: 'refresh' });
      return;
    }
    this.#channelPatterns = claims.channels;
    this.#expiresAtMs = claims.expiresAtMs;
    await this.#channels?.dropDisallowed((err, channel) => this.#conn.sendError(err, { t: 'sub', channel }));
  }
}
