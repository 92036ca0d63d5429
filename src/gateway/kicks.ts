/**
 * Closing connections by name (DESIGN.md §6, §9): one connection replaced by a newer
 * one of its device (4002), or a user's connections closed through the presence API
 * (docs/api.md "Presence"), here or on the node holding them. Another node is told
 * through the node bus; a kick of either kind its subscriber did not receive is sent
 * again while that node is still registered (its subscriber reconnecting after Redis
 * restarted), until a registration renewed when it was first sent would have lapsed and
 * one renewal more (20 s), and so is a replacement kick whose PUBLISH failed (Redis down
 * a moment, or refusing it). A dead node's kicks so end quietly when its registration
 * lapses; those given up on while the node was still registered are gathered per node
 * for {@link OUTAGE_LOG_INTERVAL_MS} and logged as one line.
 */
import type { Bus, KickMessage } from '../cluster/bus.js';
import type { NodeRegistry } from '../cluster/node-registry.js';
import type { Presence, ReplacedEntry } from '../cluster/presence.js';
import { CloseCode } from '../delivery/close-codes.js';
import type { Hub } from '../delivery/hub.js';
import { outageFields } from '../errors.js';
import type { Logger } from '../logger.js';
import { OUTAGE_LOG_INTERVAL_MS } from '../log-throttle.js';
import type { PendingHandshakes } from './pending-handshakes.js';

/** The reason of the close (4002) of a connection replaced by a new one of its device. */
export const REPLACED_REASON = 'replaced by a new connection of the same device';

/** How often a kick no subscriber received is sent again while its node is registered, ms. */
export const KICK_RETRY_MS = 250;
/** How many of the connections whose kicks were given up on a line names (it counts them all). */
const GIVEN_UP_CONNS_NAMED = 5;

/** What kicks are sent through and act on. */
export interface KickDeps {
  /** This node's id. */
  readonly node: string;
  readonly bus: Pick<Bus, 'kick'>;
  /** Its `ttlMs` and `intervalMs` set how long a kick is sent again ({@link Kicks.retryForMs}). */
  readonly registry: Pick<NodeRegistry, 'isRegistered' | 'ttlMs' | 'intervalMs'>;
  readonly presence: Pick<Presence, 'list' | 'closeConns'>;
  /** This node's handshakes not open yet: a kick naming one closes it once open. */
  readonly handshakes: PendingHandshakes;
  /** This node's connections. */
  readonly hub: Pick<Hub, 'connectionsOf'>;
  /** False once shutdown began: kicks are no longer sent again (Redis is closing). */
  accepting(): boolean;
  readonly logger: Logger;
  /**
   * How long the kicks given up on for one node are gathered into one warning, ms,
   * from the first ({@link OUTAGE_LOG_INTERVAL_MS} unless given: a test's is short).
   */
  readonly givenUpLogMs?: number;
}

/** Kicks of one node given up on, gathered for one warning. */
interface GivenUp {
  /** How many. */
  count: number;
  /** The first {@link GIVEN_UP_CONNS_NAMED} of their connections. */
  readonly conns: string[];
}

/** The kicks of one node. */
export class Kicks {
  readonly #deps: KickDeps;
  /** Node → its kicks given up on since its last warning, logged at the end of the gathering ({@link #gaveUp}). */
  readonly #givenUp = new Map<string, GivenUp>();

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
   * Closes each connection of `user` that a new one of its device replaced (4002,
   * {@link REPLACED_REASON}), as {@link connection} does. Returns at once; never rejects.
   */
  replaced(user: string, replaced: readonly ReplacedEntry[]): void {
    for (const old of replaced) this.connection(user, old.conn, old.node, CloseCode.replaced, REPLACED_REASON);
  }

  /**
   * Closes a user's connections on every node (all, or one device's), and frees their
   * presence entries at once, marking each connection closed (Presence.closeConns): a
   * node that missed the kick although Redis counted its subscriber (a half-open link,
   * reset before it delivered) closes the connection with `code` and `reason` when it
   * next refreshes its presence, within a second of its link coming back, rather than
   * writing the entry back (the network-fault tester's kick2).
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
    await presence.closeConns(user, entries.map((e) => e.conn), code, reason);
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
   * How long a kick no subscriber received is sent again, ms: the registry's TTL (a
   * node that died before the kick was first sent is unregistered by then, its
   * connections gone with it) and one renewal interval more (this node reads the
   * registration by Redis's clock as measured at its last renewal, and retries at
   * {@link KICK_RETRY_MS}). 20 s on a node (NODE_TTL_MS 15 s, NODE_RENEW_MS 5 s): before,
   * 10 s, within a dead node's registration, so a crash's every replaced connection got
   * a warning of its own, all at once (a crash tester's L2: 82 lines).
   */
  get retryForMs(): number {
    return this.#deps.registry.ttlMs + this.#deps.registry.intervalMs;
  }

  /**
   * Sends `kicks` to `node` again every {@link KICK_RETRY_MS} while no subscriber
   * receives them and the node is still registered (its subscriber reconnecting), for
   * up to {@link retryForMs}; ends quietly once the node is not registered. Never rejects.
   */
  #again(node: string, kicks: readonly KickMessage[]): void {
    const { registry, bus } = this.#deps;
    const until = performance.now() + this.retryForMs;
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
      else this.#gaveUp(node, kicks);
    };
    setTimeout(() => void attempt(), KICK_RETRY_MS).unref();
  }

  /**
   * Notes `kicks` given up on while `node` was still registered (alive, its subscriber
   * not back): the first of a node starts a gathering of {@link KickDeps.givenUpLogMs},
   * at whose end one warning names how many connections were not kicked and the first
   * few of them. A burst of replaced connections (a node's clients all moving at once)
   * is one line, not one per connection.
   */
  #gaveUp(node: string, kicks: readonly KickMessage[]): void {
    let given = this.#givenUp.get(node);
    if (given === undefined) {
      given = { count: 0, conns: [] };
      this.#givenUp.set(node, given);
      setTimeout(() => this.#logGivenUp(node), this.#deps.givenUpLogMs ?? OUTAGE_LOG_INTERVAL_MS).unref();
    }
    given.count += kicks.length;
    for (const k of kicks) if (k.conn !== undefined && given.conns.length < GIVEN_UP_CONNS_NAMED) given.conns.push(k.conn);
  }

  /** Logs the kicks of `node` gathered by {@link #gaveUp}, and ends the gathering. */
  #logGivenUp(node: string): void {
    const given = this.#givenUp.get(node);
    this.#givenUp.delete(node);
    if (given === undefined) return;
    this.#deps.logger.warn({ node, connections: given.count, conns: given.conns, retriedForMs: this.retryForMs },
      'kicks not received by their node while it stayed registered; it closes those connections at their next presence refresh that reaches Redis');
  }
}
