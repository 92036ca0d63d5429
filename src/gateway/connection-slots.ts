/**
 * The node's bound on its WebSocket connections, all users together
 * (`PIXIU_MAX_CONNECTIONS`, its default: connection-bound.ts). What is counted is what
 * holds a file descriptor: the socket of every upgrade request on `GET /v1/connect`,
 * from its request until the socket closes — a handshake in progress, an open
 * WebSocket, and a refused handshake until its answer is out and its socket closed.
 * A plain request to the route (no `Connection: Upgrade`) is an HTTP connection like a
 * producer's and is not counted; an upgrade socket carries one request only
 * (upgrade-guard.ts), so none is counted twice.
 *
 * Past the bound a handshake is refused 503 `UNAVAILABLE` with `Retry-After` as soon as
 * its request arrives, before its token is read and before it takes a handshake slot
 * (handshake-slots.ts), and counted in `pixiu_ws_handshakes_total{outcome="full"}`
 * (handshake-refusals.ts). A node refuses, rather than queues: a client's back-off
 * (docs/protocol.md, Close codes) waits for it, and a load balancer may send it to
 * another node.
 */
import type { Socket } from 'node:net';

/** The sockets of WebSocket handshakes and connections this node holds, bounded. */
export class ConnectionSlots {
  readonly #limit: number;
  #open = 0;
  /**
   * One close listener for every socket counted, added with `on` (a socket closes once):
   * no closure or `once` wrapper per connection (upgrade-guard.ts says what each costs).
   */
  readonly #release = (): void => {
    this.#open -= 1;
  };

  /** @param limit connections at most (`PIXIU_MAX_CONNECTIONS`), ≥ 1 */
  constructor(limit: number) {
    this.#limit = limit;
  }

  /** The bound. */
  get limit(): number {
    return this.#limit;
  }

  /** Sockets counted now: handshakes in progress and open WebSockets. */
  get open(): number {
    return this.#open;
  }

  /**
   * Counts `socket` until it closes. A socket destroyed already holds nothing and is not
   * counted. Call it once per socket.
   * @returns false, counting nothing, when the node holds its bound already
   */
  take(socket: Socket): boolean {
    if (socket.destroyed) return true;
    if (this.#open >= this.#limit) return false;
    this.#open += 1;
    socket.on('close', this.#release);
    return true;
  }
}
