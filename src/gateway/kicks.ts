/**
 * Closing connections by name (DESIGN.md §6, §9): one connection replaced by a newer
 * one of its device (4002), or a user's connections closed through the presence API
 * (docs/api.md "Presence"), here or on the node holding them. Another node is told
 * through the node bus; a kick of either kind its subscriber did not receive is sent
 * again while that node is still registered (its subscriber reconnecting after Redis
 * restarted), for up to 10 s, and so is a replacement kick whose PUBLISH failed (Redis
 * down a moment, or refusing it).
 */
import type { Bus, KickMessage } from '../cluster/bus.js';
import type { NodeRegistry } from '../cluster/node-registry.js';
import type { Presence } from '../cluster/presence.js';
import type { Hub } from '../delivery/hub.js';
import { outageFields } from '../errors.js';
import type { Logger } from '../logger.js';
import type { PendingHandshakes } from './pending-handshakes.js';

/** How often a kick no subscriber received is sent again while its node is registered, ms. */
const KICK_RETRY_MS = 250;
/** How long such a kick is sent again, ms: a subscriber reconnects within its 2 s back-off and a connect. */
const KICK_RETRY_FOR_MS = 10_000;

/** What kicks are sent through and act on. */
export interface KickDeps {
  /** This node's id. */
  readonly node: string;
  readonly bus: Pick<Bus, 'kick'>;
  readonly registry: Pick<NodeRegistry, 'isRegistered'>;
  readonly presence: Pick<Presence, 'list' | 'removeConns'>;
  /** This node's handshakes not open yet: a kick naming one closes it once open. */
  readonly handshakes: PendingHandshakes;
  /** This node's connections. */
  readonly hub: Pick<Hub, 'connectionsOf'>;
  /** False once shutdown began: kicks are no longer sent again (Redis is closing). */
  accepting(): boolean;
  readonly logger: Logger;
}

/** The kicks of one node. */
export class Kicks {
  readonly #deps: KickDeps;

  constructor(deps: KickDeps) {
    this.#deps = deps;
  }

  /**
   * Closes one connection (or marks its pending handshake to close once open), here or
   * on the node holding it: a device's connection replaced by a newer one (4002). Its
   * presence entry is already gone (replaced), so a kick the other node's subscriber
   * misses would leave the connection open, receiving the user's messages beside the
   * new one, until its next heartbeat finds it replaced (up to `PIXIU_HEARTBEAT`): one
   * no subscriber received is sent again ({@link #again}), as {@link user}'s are, and
   * so is one whose PUBLISH failed (logged at warn; before, only logged, and the old
   * connection stayed open). Returns at once; never rejects.
   */
  connection(user: string, conn: string, node: string, code: number, reason: string): void {
    const kick: KickMessage = { t: 'kick', user, conn, code, reason };
    if (node === this.#deps.node) {
      this.local(kick);
      return;
    }
    this.#deps.bus.kick(node, kick).then(
      (received) => {
        if (!received) this.#again(node, [kick]);
      },
      (err: unknown) => {
        // Redis refused or lost the PUBLISH: sent again as one nobody received.
        this.#deps.logger.warn({ ...outageFields(err), node, conn }, 'kick could not be sent, will retry');
        this.#again(node, [kick]);
      },
    );
  }

  /**
   * Closes a user's connections on every node (all, or one device's), and frees their
   * presence entries at once.
   * @returns how many connections presence listed (closed or to be closed)
   * @throws when Redis fails listing or removing presence
   */
  async user(user: string, device: string | undefined, code: number, reason: string): Promise<number> {
    const { presence, bus } = this.#deps;
    const entries = (await presence.list(user)).filter((e) => device === undefined || e.device === device);
    const nodes = new Set(entries.map((e) => e.node));
    for (const n of nodes) {
      const kick: KickMessage = device === undefined ? { t: 'kick', user, code, reason } : { t: 'kick', user, device, code, reason };
      if (n === this.#deps.node) this.local(kick);
      else if (!(await bus.kick(n, kick))) {
        // No subscriber received it: the node is gone, or alive with its subscriber
        // reconnecting. Its entries are removed below either way, so a live node would
        // keep the connections open and write them back at their next refresh: the
        // kick is sent again, naming each connection (not to close ones opened since).
        this.#again(n, entries.filter((e) => e.node === n).map((e) => ({ t: 'kick', user, conn: e.conn, code, reason })));
      }
    }
    // Freed now rather than when each node closes them: a crashed node's connections
    // would hold the user's slots until its registration lapsed (docs/api.md "Presence").
    await presence.removeConns(user, entries.map((e) => e.conn));
    return entries.length;
  }

  /** Closes the local connections a kick names (from this node or the bus), and marks its pending handshakes. */
  local(kick: KickMessage): void {
    this.#deps.handshakes.kick(kick, { code: kick.code, reason: kick.reason });
    for (const c of this.#deps.hub.connectionsOf(kick.user)) {
      if ((kick.conn === undefined || c.id === kick.conn) && (kick.device === undefined || c.device === kick.device)) {
        c.close(kick.code, kick.reason);
      }
    }
  }

  /**
   * Sends `kicks` to `node` again every {@link KICK_RETRY_MS} while no subscriber
   * receives them and the node is still registered (its subscriber reconnecting), for
   * up to {@link KICK_RETRY_FOR_MS}. Never rejects.
   */
  #again(node: string, kicks: readonly KickMessage[]): void {
    const { registry, bus, logger } = this.#deps;
    const until = performance.now() + KICK_RETRY_FOR_MS;
    const attempt = async (): Promise<void> => {
      if (!this.#deps.accepting()) return; // shutting down: its Redis is closing
      try {
        if (!(await registry.isRegistered(node))) return;
        let received = false;
        for (const kick of kicks) received = (await bus.kick(node, kick)) || received;
        if (received) return;
      } catch {
        // Redis failing: tried again below.
      }
      if (performance.now() < until) setTimeout(() => void attempt(), KICK_RETRY_MS).unref();
      else logger.warn({ node, conns: kicks.map((k) => k.conn) }, 'kick not received by its node; its connections stay open until they close');
    };
    setTimeout(() => void attempt(), KICK_RETRY_MS).unref();
  }
}
