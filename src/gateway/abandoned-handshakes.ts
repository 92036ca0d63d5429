/**
 * Handshakes whose client has already left (DESIGN.md §6: the same device connecting
 * again replaces its old connection — a client that is gone replaces nothing).
 *
 * A client that gives up on a handshake (docs/protocol.md point 9: "Close a socket that
 * has not opened within 10 s") closes its socket, and on a slow uplink its request
 * still reaches the node, with the FIN (or a RST) right behind it. Run to the end, that
 * handshake replaced the device's live connection (4002) and then went away itself:
 * the device had no connection until it reconnected, and two of them within a minute
 * made the docs' example client take a new device id (the network-fault tester's F1).
 * connect-route.ts asks {@link clientGone} before the presence write that replaces the
 * device's connections and again before it closes them; a handshake found abandoned is
 * dropped unanswered ({@link AbandonedHandshakes}). What is left: docs/decisions.md,
 * "Abandoned handshakes".
 */
import { setImmediate as nextCheckPhase } from 'node:timers/promises';
import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { socketGone } from '../api/abandoned-requests.js';
import type { ReplacedEntry } from '../cluster/presence.js';
import type { GatewayDeps } from './gateway-deps.js';

/**
 * Whether the client has left the upgrade `socket`: it was reset or destroyed, or the
 * client's FIN has been read (`readable` false once 'end' is emitted; Node's HTTP
 * server allows half-open sockets, so a FIN does not destroy it). A client that has
 * half-closed can never send a WebSocket frame, and `ws` refuses to upgrade such a
 * socket too (its completeUpgrade destroys a socket that is not readable and writable).
 *
 * First it lets the event loop poll once more, so that a FIN or RST already received
 * behind the request is seen: libuv stops reading a socket at a short read, so the read
 * that brought the request has not read what followed it, and a handshake whose steps
 * before the check need no I/O (a client resuming with `last_seq`, an HS256 token)
 * reaches it in the same turn of the loop. Two check phases later, with a poll phase
 * between them, the EOF or reset has been read and its 'end' or 'close' emitted. Costs
 * one turn of the loop (well under a millisecond on an idle node).
 */
export async function clientGone(socket: Socket): Promise<boolean> {
  await nextCheckPhase();
  await nextCheckPhase();
  return socketGone(socket);
}

/** What dropping an abandoned handshake needs from the gateway. */
type Deps = Pick<GatewayDeps, 'presence' | 'handshakes' | 'kickReplaced' | 'onAbandoned' | 'logger'>;

/** Drops the handshakes of `/v1/connect` whose client left before they took effect. */
export class AbandonedHandshakes {
  readonly #deps: Deps;

  constructor(deps: Deps) {
    this.#deps = deps;
  }

  /**
   * Ends a handshake whose client left: no answer (its socket is destroyed, the route's
   * handler never runs), counted in `pixiu_ws_handshakes_total{outcome="abandoned"}`
   * and logged at debug. The device's connection is left as it is.
   */
  drop(req: FastifyRequest, reply: FastifyReply, user: string, device: string): void {
    this.#deps.onAbandoned();
    this.#deps.logger.debug({ user, device }, 'handshake abandoned by its client; the device keeps its connection');
    reply.hijack();
    req.raw.socket.destroy();
  }

  /**
   * For a handshake admitted to presence as `conn` whose client left during that write:
   * takes its entry back and writes back the entries of the connections it replaced,
   * which were not closed (Presence.withdraw). When a newer handshake of the device was
   * admitted meanwhile, or Redis fails, those connections are closed 4002, as they were
   * before this check existed. Never rejects.
   */
  async withdraw(user: string, conn: string, device: string, replaced: readonly ReplacedEntry[]): Promise<void> {
    // kickReplaced is called on the deps, not destructured: it is a method of the
    // Gateway (it reads the gateway's kicks), and a bare call has no `this`.
    const { presence, handshakes } = this.#deps;
    handshakes.settle(conn);
    let restored = false;
    try {
      restored = await presence.withdraw(user, conn, device, replaced);
    } catch {
      // Its entry stays until removed: a failed removal is kept and retried (presence-removals.ts).
      presence.remove(user, conn).catch(() => undefined);
    }
    if (!restored) this.#deps.kickReplaced(user, replaced);
  }
}
