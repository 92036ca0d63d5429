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
 * (src/api/refusal-counts.ts). A node refuses, rather than queues: a client's back-off
 * (docs/protocol.md, Close codes) waits for it, and a load balancer may send it to
 * another node.
 */
import type { Socket } from 'node:net';
import { unavailable, type PixiuError } from '../errors.js';

/** The refusals of {@link fullRefusal}, told apart from other 503s by {@link isFullRefusal}. */
const fullRefusals = new WeakSet<PixiuError>();

/** True when `err` is a handshake refused because the node held its bound of connections. */
export function isFullRefusal(err: PixiuError): boolean {
  return fullRefusals.has(err);
}

/**
 * The refusal of a handshake past the bound (503 `UNAVAILABLE`, `Retry-After`).
 * @param open the connections the node holds, open or opening
 */
export function fullRefusal(open: number): PixiuError {
  const err = unavailable(`this node holds as many WebSocket connections as it takes (${open} open or opening: PIXIU_MAX_CONNECTIONS); retry after its Retry-After`);
  fullRefusals.add(err);
  return err;
}

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
