/**
 * The dead-connection rule of docs/protocol.md ("Detecting a dead connection"), for
 * `pixiu connect`: a client that has had no frame and no WebSocket ping for twice
 * `heartbeat` drops the connection. Any frame or ping received is a sign of life; after
 * `heartbeat` of silence an application `ping` asks for one (its `pong`, or anything
 * else, restarts the count), and at twice `heartbeat` of silence the connection is
 * taken for dead. Without it, `pixiu connect` sat on a half-open connection (a laptop
 * changing Wi-Fi, a NAT that dropped its mapping) until it was killed (the
 * network-fault tester's F2: 138 s).
 *
 * One timer, re-armed when it fires, not at each frame: a frame only notes the time.
 * Times are on the monotonic clock (`performance.now()`), as the docs ask.
 */
import type { WebSocket } from 'ws';
import { SETTINGS } from '../config/settings.js';

/** What the watch does when the connection goes silent. */
export interface SilenceActions {
  /** Sends an application `{"t":"ping"}` (its `pong` is a frame like any other). */
  ping(): void;
  /** The connection is taken for dead: drop it. `silentMs`: how long nothing came. */
  drop(silentMs: number): void;
}

/** Watches one connection for silence (see the module's doc). */
export class SilenceWatch {
  readonly #actions: SilenceActions;
  #heartbeatMs: number;
  #lastHeard = performance.now();
  #pinged = false;
  #timer: NodeJS.Timeout | undefined;

  /**
   * Starts watching, as of now.
   * @param heartbeatMs the server's ping interval, ms, until {@link setHeartbeat} gives
   *   the one `welcome` names (its `heartbeat`, seconds); 25 s is the default's
   */
  constructor(heartbeatMs: number, actions: SilenceActions) {
    this.#heartbeatMs = heartbeatMs;
    this.#actions = actions;
    this.#arm(heartbeatMs);
  }

  /** A frame or a WebSocket ping came: the connection is alive. Call it before any work on the frame. */
  heard(): void {
    this.#lastHeard = performance.now();
    this.#pinged = false;
  }

  /** The server's ping interval as `welcome` gave it, ms. */
  setHeartbeat(heartbeatMs: number): void {
    if (heartbeatMs === this.#heartbeatMs) return;
    this.#heartbeatMs = heartbeatMs;
    this.#check();
  }

  /** Stops watching (the connection is closing or closed). */
  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(ms: number): void {
    clearTimeout(this.#timer);
    // Unref'd: the socket keeps the process alive while it is open, not this timer.
    this.#timer = setTimeout(() => this.#check(), Math.max(ms, 1)).unref();
  }

  #check(): void {
    const silentMs = performance.now() - this.#lastHeard;
    if (silentMs >= 2 * this.#heartbeatMs) {
      this.stop();
      this.#actions.drop(silentMs);
      return;
    }
    if (silentMs >= this.#heartbeatMs && !this.#pinged) {
      this.#pinged = true;
      this.#actions.ping();
    }
    this.#arm((this.#pinged ? 2 : 1) * this.#heartbeatMs - silentMs);
  }
}

/**
 * Watches `pixiu connect`'s open connection `ws`: the server's WebSocket pings count as
 * life (`ws` answers them), the caller reports each frame with {@link SilenceWatch.heard}
 * and the heartbeat `welcome` names with {@link SilenceWatch.setHeartbeat} (until then,
 * the server's default, 25 s). A silent connection is said so on stderr and dropped
 * (`terminate`: its close is 1006). Stops when the socket closes.
 * @param ping sends an application `ping` whose `pong` the caller does not print
 */
export function watchSilence(ws: WebSocket, ping: () => void): SilenceWatch {
  const watch = new SilenceWatch(SETTINGS.heartbeatMs.default, {
    ping,
    drop: (silentMs) => {
      process.stderr.write(`nothing from the service for ${(silentMs / 1000).toFixed(1)} s, not even a ping `
        + '(twice its heartbeat: docs/protocol.md, "Detecting a dead connection"): dropping the connection\n');
      ws.terminate();
    },
  });
  ws.on('ping', () => watch.heard());
  ws.on('close', () => watch.stop());
  return watch;
}
