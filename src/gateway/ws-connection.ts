/**
 * One WebSocket connection (DESIGN.md §6): client frames in, delivery frames out, and
 * the connection's own clocks — server pings and the idle close, token expiry, and
 * backpressure (DESIGN.md §5: pause above the high-water mark; close 4009 when paused
 * and nothing drained for too long, or over the hard cap). What the client sends is
 * handled by its {@link FrameHandler} (frame-handler.ts).
 */
import type { Socket } from 'node:net';
import type { WebSocket, RawData } from 'ws';
import type { PixiuError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { PageAllowance, ResumeRequest } from '../delivery/machine.js';
import type { DeliveryConnection, UserSession } from '../delivery/session.js';
import type { ErrorFrame, ErrorRef, FrameType } from '../delivery/frames.js';
import { afterWrite, drainMarkOf, endsPause, pageAllowance, Pause } from './backpressure.js';
import { FrameHandler, type FrameConnection } from './frame-handler.js';
import { CloseCode } from '../delivery/close-codes.js';
import { Heartbeat, type Ticking } from './connection-clock.js';
import type { ConnectionDeps, ConnectionIdentity, ConnectionStart } from './gateway-deps.js';
import { corkForThisTick, flushCorked } from './tick-cork.js';
import { noteFrameParsers, refusalCloseCode } from './receiver-refusals.js';
import type { ConnectionLogLevel } from './close-log.js';
import { closeWebSocket } from './server-close.js';
import { BroadcastSubscription, tagSet } from '../broadcast/subscription.js';
import { CATCH_UP_FAILED_LOG, resumeBroadcasts } from './catch-up-failure.js';

/** `ws` send options for a text frame given as bytes (a Buffer is sent binary by default). */
const TEXT_FRAME: { readonly binary: false } = { binary: false };

/**
 * The connection of each WebSocket, for the WebSocket's listeners: they are the same
 * five functions for every connection, called with the WebSocket as `this`
 * ({@link WsConnection.start}), not five closures of each connection with their
 * context (~230 bytes of heap per idle connection beyond this map's entry,
 * bench/README.md, 2026-12-05 memtrim).
 */
const connectionOf = new WeakMap<WebSocket, WsConnection>();

/** A live WebSocket connection of one user's device. */
export class WsConnection implements DeliveryConnection, FrameConnection, Ticking {
  readonly id: string;
  readonly user: string;
  readonly device: string;
  readonly since: number;
  readonly #ws: WebSocket;
  /** The TCP socket under {@link #ws}, to write several frames at once; undefined: not found. */
  readonly #socket: Socket | undefined;
  readonly #deps: ConnectionDeps;
  /** Created on first use: most connections never log, and each child logger costs memory. */
  #logger: Logger | undefined;
  readonly #broadcast: BroadcastSubscription | undefined;
  /** `last_bseq` from the handshake: where the broadcast feed resumes after `welcome`. */
  #lastBseq: string | undefined;
  /** Gives the handshake's slot back (handshake-slots.ts) once `welcome` is out; undefined after. */
  #onWelcome: (() => void) | undefined;
  #session: UserSession | undefined;
  /** When the client was last heard from, the next server ping, the pongs owed. */
  readonly #heartbeatState: Heartbeat;
  /** Delivery is paused by backpressure exactly while set (backpressure.ts). */
  #pause: Pause | undefined;
  /** What this socket holds as the node's sum counts it (buffer-budget.ts `recount`), bytes; 0 once closed. */
  #counted = 0;
  #closed = false;
  /** The close code the server decided (close()); counted instead of the 1006 a non-reading peer ends with. */
  #closeCode: number | undefined;
  /** What the client sends: its frames, pings and pongs, and the token a `refresh` changes. */
  readonly #frames: FrameHandler;

  /**
   * @param ws the upgraded WebSocket
   * @param tcp the TCP socket under it (the upgrade request's), to write several frames at once
   */
  constructor(ws: WebSocket, who: ConnectionIdentity, deps: ConnectionDeps, tcp?: Socket) {
    this.#ws = ws;
    this.#socket = tcp;
    this.id = who.id;
    this.user = who.user;
    this.device = who.device;
    this.since = who.since;
    this.#deps = deps;
    this.#heartbeatState = new Heartbeat(deps.clock.monotonicMs(), deps.config.heartbeatMs);
    this.#frames = new FrameHandler(this, deps, who);
    this.#broadcast = deps.broadcast ? new BroadcastSubscription(tagSet(who.tags), this) : undefined;
  }

  /**
   * Logs one line through the connection's child logger (conn, user, device bound),
   * made on first use and only for a level that is on: most connections log nothing
   * (at debug level off, every one would keep a child logger for nothing).
   */
  #logLine(level: ConnectionLogLevel, fields: object | (() => object), msg: string): void {
    if (!this.#deps.logger.isLevelEnabled(level)) return;
    const logger = (this.#logger ??= this.#deps.logger.child({ conn: this.id, user: this.user, device: this.device }));
    logger[level](typeof fields === 'function' ? fields() : fields, msg);
  }

  /**
   * Starts the connection: wires the socket, arms its clocks, logs it in to delivery.
   * @param start its `last_bseq`, the handshake's callback and its request's `reqId` and address ({@link ConnectionStart})
   */
  start(resume: ResumeRequest, { lastBseq, onWelcome, client }: ConnectionStart = {}): void {
    this.#lastBseq = lastBseq;
    this.#onWelcome = onWelcome;
    // Registered at once but held: live broadcasts queue until `welcome` is out.
    if (this.#deps.broadcast) this.#broadcast?.join(this.#deps.broadcast.fanout, lastBseq !== undefined);
    const ws = this.#ws;
    if (this.#socket !== undefined) noteFrameParsers(this.#socket);
    connectionOf.set(ws, this);
    ws.on('message', WsConnection.#message);
    ws.on('pong', WsConnection.#pong);
    ws.on('ping', WsConnection.#ping);
    ws.on('close', WsConnection.#close);
    ws.on('error', WsConnection.#error);
    this.#deps.clock.add(this);
    this.#session = this.#deps.hub.attach(this.user, this, resume);
    this.#logLine('debug', () => ({ resume, ...client?.() }), 'connection open');
  }

  /** The delivery session, once attached (start()). */
  get session(): UserSession | undefined { return this.#session; }

  /**
   * Writes one text frame, answering whether it did (not once closed); pauses delivery above the
   * high-water mark (DESIGN.md §5). A `bcast` or `pub` the node's budget refuses is not written: the connection closes 4009.
   * @param frame the JSON text, or its UTF-8 bytes (a broadcast's frame, encoded once
   *   per node and written to every socket as is)
   * @param t its type, counted in `pixiu_ws_frames_sent_total`; a `msg` allows one more idle ack (frame-limits.ts)
   */
  send(frame: string | Buffer, t: FrameType): boolean {
    if (this.#closed || ((t === 'bcast' || t === 'pub') && this.#refusesLive())) return false;
    this.#deps.onFrames(t, 1);
    if (t === 'msg') this.#frames.msgSent();
    const socket = this.#socket;
    if (socket !== undefined) corkForThisTick(socket);
    if (typeof frame === 'string') this.#ws.send(frame, this.#onWritten);
    else this.#ws.send(frame, TEXT_FRAME, this.#onWritten);
    if (socket !== undefined) flushCorked(socket, this.#deps.corkFlushBytes);
    this.#checkBuffered();
    return true;
  }

  /** FrameSink `countGap`: a broadcast-stream `gap` {@link send} wrote. */
  countGap(): void { this.#deps.onBroadcastGap?.(); }

  /**
   * Writes several frames in order (a batch of broadcasts), corking the socket around
   * them so that they leave in one system call: bench:broadcast measured `writev` at
   * about half of the fan-out's CPU when every frame was written on its own. Only the
   * last write carries the drain callback (when it is written, so are the others),
   * and the buffer is checked once, after the batch.
   */
  sendFrames(entries: readonly { readonly frame: Buffer }[]): void {
    const n = entries.length;
    if (this.#closed || n === 0 || this.#refusesLive()) return;
    this.#deps.onFrames('bcast', n);
    const socket = n > 1 ? this.#socket : undefined;
    socket?.cork();
    try {
      for (let i = 0; i < n - 1; i++) this.#ws.send((entries[i] as { readonly frame: Buffer }).frame, TEXT_FRAME);
      this.#ws.send((entries[n - 1] as { readonly frame: Buffer }).frame, TEXT_FRAME, this.#onWritten);
    } finally {
      socket?.uncork();
    }
    this.#checkBuffered();
  }

  /** Before a `bcast` or `pub` is written (a catch-up's waits out pauses): true, closed 4009, when the node's budget refuses it (buffer-budget.ts `refusesLive`). */
  #refusesLive(): boolean {
    if (this.#pause === undefined) return false;
    const reason = this.#deps.bufferBudget.refusesLive(this.#ws.bufferedAmount, this.#pause !== undefined);
    if (reason !== undefined) this.close(CloseCode.slowConsumer, reason);
    return reason !== undefined;
  }

  /** Counts what the socket holds (buffer-budget.ts); pauses or closes 4009 as backpressure.ts `afterWrite` says. */
  #checkBuffered(): void {
    const buffered = this.#ws.bufferedAmount;
    const budget = this.#deps.bufferBudget;
    this.#counted = budget.recount(this.#counted, buffered);
    const verdict = afterWrite(buffered, this.#pause !== undefined, this.#deps.config, budget);
    if (verdict === 'close') {
      this.close(CloseCode.slowConsumer, 'slow consumer: send buffer over the hard cap');
    } else if (verdict !== 'ok') {
      this.hold(verdict === 'budget');
      this.#session?.pause(this.id);
    }
  }

  /** DeliveryConnection `byteAllowance`: what a delivery page may write now, and why (backpressure.ts `pageAllowance`). */
  byteAllowance(): PageAllowance {
    return pageAllowance(this.#ws.bufferedAmount, this.#deps.config, this.#deps.bufferBudget);
  }

  /**
   * Pauses delivery until the writes drain ({@link #onWritten}), or 4009: past a mark, or (DeliveryConnection `hold`) a page cut at
   * its allowance, `byBudget` when that was the budget's floor (as at the page's build). A budget's is counted (buffer-budget.ts `paused`).
   */
  hold(byBudget: boolean): void {
    if (this.#closed || this.#pause !== undefined) return;
    if (byBudget) this.#deps.bufferBudget.paused(this.id, this.#ws.bufferedAmount);
    const tooLong = (): void => this.close(CloseCode.slowConsumer, 'slow consumer: paused too long');
    this.#pause = new Pause(this.#deps.config.pausedTimeoutMs, tooLong, () => drainMarkOf(this.#socket, this.#ws), byBudget);
  }

  /**
   * Sends an `error` frame.
   * @param ref the frame refused, for frames a client must match the answer to
   */
  sendError(err: PixiuError, ref?: ErrorRef): void {
    const frame: ErrorFrame = { t: 'error', code: err.code, message: err.message, ...(ref === undefined ? {} : { ref }) };
    this.send(JSON.stringify(frame), 'error');
  }

  /**
   * Closes with a code (DESIGN.md §6); a peer that does not answer is cut after a grace
   * period. The code is what the close is counted and logged as, even when the peer,
   * not reading, never sees the close frame and the socket ends as 1006.
   */
  close(code: number, reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#closeCode = code;
    this.#frames.stop();
    this.#broadcast?.stop();
    // At the level its cause needs, thinned (close-log.ts); a slow consumer with what it left unread.
    this.#logLine(...this.#deps.closeLog.closeLine(code, { code, reason, ...(code === CloseCode.slowConsumer ? { bufferedBytes: this.#ws.bufferedAmount } : {}) }));
    closeWebSocket(this.#ws, this.#socket, code, reason, this.#deps.config.maxClientFrameBytes);
  }

  /**
   * For a catch-up that writes page after page (broadcasts from `last_bseq`, a channel's
   * history from `since`): undefined while the socket takes more; while delivery is
   * paused by backpressure, a promise that resolves when the pause ends (or the
   * connection closes). Waiting on it between frames keeps a catch-up from filling the
   * socket's queue past the hard cap (4009) on a client that reads at its pace.
   */
  whenWritable(): Promise<void> | undefined {
    if (this.#closed) return undefined;
    return this.#pause?.whenOver();
  }

  /**
   * A write was done (its callback): counts what the socket holds; resumes delivery
   * once the pause ends (backpressure.ts `endsPause`). Every write but the close frame
   * carries it — frames ({@link send}; of a batch, the last), pongs, server pings — so
   * that whichever is written last ends the pause. When pongs had none, a pause they
   * alone kept up (the frames with a callback written before them) outlasted the
   * client's reading again, to its 4009. One done while paused, when only the client's
   * reading makes room (the kernel's buffers are full), counts as hearing from it: a slow
   * reader of a catch-up sends nothing and its pong waits behind its backlog (walk20 2a).
   * Noted once, by the write that ends the pause (the last done while paused): the idle
   * check skips a paused connection ({@link tick}), so none before it is ever read.
   */
  readonly #onWritten = (): void => {
    const buffered = this.#ws.bufferedAmount;
    this.#counted = this.#deps.bufferBudget.recount(this.#counted, buffered);
    const pause = this.#pause;
    if (!endsPause(pause, buffered, this.#deps.config, this.#deps.bufferBudget)) return;
    this.#heartbeatState.heard(this.#deps.clock.monotonicMs());
    this.#pause = undefined;
    pause.end();
    this.#session?.drain(this.id);
  };

  /**
   * Writes a WebSocket pong of `data` (RFC 6455 §5.5.3) answering a client's ping; its
   * write can end a pause like any frame's ({@link #onWritten}).
   */
  pong(data: Buffer): void {
    this.#ws.pong(data, undefined, this.#onWritten);
    // Held to the send buffer's limits like any frame: a client that pings and never
    // reads would otherwise grow the pongs queued for it without end.
    this.#checkBuffered();
  }

  /** The connection of a WebSocket it listens to: set in {@link start} before any listener, kept for the WebSocket's life. */
  static #of(ws: WebSocket): WsConnection {
    return connectionOf.get(ws) as WsConnection;
  }

  // The WebSocket's listeners ({@link connectionOf}): `this` is the WebSocket.
  static #message(this: WebSocket, data: RawData, isBinary: boolean): void { WsConnection.#of(this).#onMessage(data, isBinary); }
  static #pong(this: WebSocket): void { WsConnection.#of(this).#onPong(); }
  static #ping(this: WebSocket, data: Buffer): void { WsConnection.#of(this).#onPing(data); }
  static #close(this: WebSocket, code: number): void { WsConnection.#of(this).#onClose(code); }
  static #error(this: WebSocket, err: Error): void { WsConnection.#of(this).#onError(err); }

  #onMessage(data: RawData, isBinary: boolean): void {
    this.#heartbeatState.heard(this.#deps.clock.monotonicMs());
    if (this.#closed) return;
    this.#frames.message(data, isBinary);
  }

  #onPong(): void {
    if (!this.#heartbeatState.pong(this.#deps.clock.monotonicMs()) && !this.#closed) this.#frames.unsolicitedPong();
  }

  /**
   * Answered by the frame handler, not by `ws` (autoPong off, gateway.ts): its own
   * guard cut a connection with more than 60 pongs unwritten — a burst of pings in one
   * packet — without a close code, counted as the client's 1006 and never logged.
   */
  #onPing(data: Buffer): void {
    this.#heartbeatState.heard(this.#deps.clock.monotonicMs());
    if (!this.#closed) this.#frames.ping(data);
  }

  #onError(err: Error): void {
    // `ws` closes the connection itself when it refuses a frame; count that code.
    this.#closeCode ??= refusalCloseCode(err);
    this.#logLine('debug', { err }, 'websocket error');
  }

  /**
   * The node's clock (connection-clock.ts): closes 4001 once the token has expired
   * (DESIGN.md §6), terminates a connection silent for the idle timeout, and runs the
   * server heartbeat when it is due. Each is checked on every tick, so each happens
   * within a tick of its time: `exp` on the wall clock, silence and pings on the monotonic one.
   */
  tick(nowMs: number, monoMs: number): void {
    // Closed by the server, waiting for the peer's close: no ping, and above all no
    // presence refresh, which would re-add the entry a replacement just removed.
    if (this.#closed) return;
    if (nowMs >= this.#frames.expiresAtMs) {
      this.close(CloseCode.tokenExpired, 'token expired');
      return;
    }
    const silentMs = this.#heartbeatState.silentMs(monoMs);
    // Paused, its reading is judged by the paused timeout (Pause), which sees a write's progress.
    if (silentMs > this.#deps.config.idleTimeoutMs && this.#pause === undefined) {
      // No close frame: a peer silent this long (no pong, no frame) is most likely gone.
      this.#logLine(...this.#deps.closeLog.idleLine({ silentMs }));
      this.#closed = true;
      // The server's decision, counted as such (by="server"), with the 1006 the cut makes.
      this.#closeCode = CloseCode.abnormal;
      this.#ws.terminate();
      return;
    }
    if (this.#heartbeatState.pingDue(monoMs)) this.#heartbeat();
  }

  /**
   * Brings the next server heartbeat forward to within `withinMs` (at a random point,
   * so that a node's connections do not all pull at once). After Redis came back from
   * an outage (the gateway calls this on every reconnect) presence is written back and
   * the inbox pulled — a `reset` when Redis lost it — without waiting up to a whole
   * heartbeat: presence entries lapse in an outage longer than their lifetime, and
   * until rewritten the user's connections neither counted against the connection
   * limit nor received notifies. A closed connection ignores it.
   */
  heartbeatSoon(withinMs: number): void {
    if (!this.#closed) this.#heartbeatState.soon(withinMs, this.#deps.clock.monotonicMs());
  }

  /** Server heartbeat: ping, pull and refresh presence. Only from {@link tick}, on an open connection. */
  #heartbeat(): void {
    this.#ws.ping(undefined, undefined, this.#onWritten);
    this.#session?.heartbeat();
    this.#deps.onHeartbeat(this);
  }

  /**
   * `welcome`'s `bseq`: where the broadcast feed of a connection without `last_bseq`
   * starts (BroadcastSubscription `startedAfter`); undefined with `last_bseq` (its
   * catch-up says what it missed) or without broadcasts.
   */
  welcomeBseq(): string | undefined {
    return this.#lastBseq === undefined ? this.#broadcast?.startedAfter : undefined;
  }

  /** `welcome` is out: handle the client frames held so far; start the broadcast feed (catching up from `last_bseq`). */
  welcomed(): void {
    const onWelcome = this.#onWelcome;
    this.#onWelcome = undefined;
    onWelcome?.();
    // After the frames the session is writing with `welcome` (its gap, reset or first
    // messages): an ack handled now could run the machine inside its own effects.
    queueMicrotask(() => this.#frames.open());
    const deps = this.#deps.broadcast;
    if (this.#broadcast && deps) resumeBroadcasts(this.#broadcast, deps, this.#lastBseq, (failure) => {
      this.#logLine(failure.level, failure.fields, CATCH_UP_FAILED_LOG);
      this.sendError(failure.error);
    });
  }

  #onClose(code: number): void {
    this.#broadcast?.stop(this.#deps.broadcast?.fanout);
    this.#frames.closeChannels();
    this.#closed = true;
    this.#deps.clock.delete(this);
    this.#pause?.end();
    this.#pause = undefined;
    this.#counted = this.#deps.bufferBudget.recount(this.#counted, 0);
    this.#deps.hub.detach(this.user, this.id);
    this.#frames.stop();
    // What the server decided (4009, 4008, …), not the 1006 of a peer that never read the close frame.
    this.#deps.onClosed(this, this.#closeCode ?? code, this.#closeCode === undefined ? 'client' : 'server');
    this.#logLine('debug', { code, decided: this.#closeCode }, 'connection closed');
  }
}
