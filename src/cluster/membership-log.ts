/**
 * The log lines of the cluster's membership as one node sees it in the node registry
 * (node-registry.ts, DESIGN.md §9): at info, `node joined the cluster` when a node it
 * did not know registers, and `node left the cluster` when one it knew is registered no
 * more — each once per change, with the node's store and advertised URL when its store
 * lease names them. Before, no node logged another's coming or going: an on-call
 * timeline ("when did node X drop out, who noticed") needed `redis-cli` on the
 * registry (an ops finding).
 *
 * A node registers before it listens, and writes its lease (store id, URL) only once it
 * listens; so a join is logged at the first renewal that finds its lease, or without
 * URL after {@link JOIN_WAIT_RENEWALS} renewals. A node gone before its lease was seen
 * logs its join and its leaving together. Why it left is told from its registration's
 * expiry as last seen: removed before it (`stopped`: it deregistered at shutdown, or —
 * killed or crashed — a new run on its data dir removed its registration at its start:
 * node-registry.ts `start`) or after (`registration lapsed`: killed, hung, or cut off
 * from Redis).
 *
 * Each line names the node's build too, `version` and `commit` from its node-settings
 * entry (node-entry.ts; `null` both for a node of a release too old to say, absent
 * when no entry was read): which release each node runs, during a rolling upgrade.
 */
import type { Logger } from '../logger.js';
import type { BuildInfo } from '../version.js';

/** Renewals a join waits for the new node's lease before it is logged without URL. */
export const JOIN_WAIT_RENEWALS = 3;

/** Where a node can be read, from its store lease. */
export interface NodeAddress {
  readonly storeId: string;
  readonly url: string;
}

/** Node id → its address, for the nodes that hold a lease (partition-claims.ts `leasesByNode`). */
export type AddressLookup = () => Promise<ReadonlyMap<string, NodeAddress>>;

/** Node id → the build its entry names, null for one that names none (node-entry.ts `nodeBuilds`). */
export type BuildLookup = () => Promise<ReadonlyMap<string, BuildInfo | null>>;

/** A registered node this node knows of. */
interface Member {
  /** Its registration's expiry as last seen, ms by Redis's clock. */
  expiresAt: number;
  address: NodeAddress | undefined;
  /** Its build; null: its entry names none (an older release); undefined: no entry read yet. */
  build: BuildInfo | null | undefined;
  /** True once its join was logged (or it was there when this node started). */
  announced: boolean;
  /** Renewals that found it without a lease while its join waits. */
  waited: number;
}

/** The membership lines of one node. */
export class MembershipLog {
  readonly #logger: Logger;
  readonly #self: string;
  readonly #lookup: AddressLookup;
  readonly #builds: BuildLookup;
  readonly #members = new Map<string, Member>();
  #started = false;
  /** Observations are handled one after another (each may await a lookup). */
  #queue: Promise<void> = Promise.resolve();

  /**
   * @param self this node's id (never logged as a peer)
   * @param builds the nodes' builds; by default none is known (the lines go without)
   */
  constructor(logger: Logger, self: string, lookup: AddressLookup, builds: BuildLookup = () => Promise.resolve(new Map())) {
    this.#logger = logger;
    this.#self = self;
    this.#lookup = lookup;
    this.#builds = builds;
  }

  /**
   * The registry as a renewal read it: node id → registration expiry (ms, Redis's
   * clock), expired ones removed; `nowMs` that renewal's Redis time. Never rejects;
   * the lines are written once the lookup it may need has answered.
   */
  observe(registered: ReadonlyMap<string, number>, nowMs: number): Promise<void> {
    this.#queue = this.#queue.then(() => this.#observe(registered, nowMs)).catch((err: unknown) => {
      this.#logger.debug({ err }, 'cluster membership not logged');
    });
    return this.#queue;
  }

  /** Addresses by node, or an empty map when Redis did not answer (the line goes without). */
  async #addresses(): Promise<ReadonlyMap<string, NodeAddress>> {
    return this.#lookup().catch(() => new Map<string, NodeAddress>());
  }

  /** Builds by node, or an empty map when Redis did not answer (the line goes without). */
  async #buildsRead(): Promise<ReadonlyMap<string, BuildInfo | null>> {
    return this.#builds().catch(() => new Map<string, BuildInfo | null>());
  }

  async #observe(registered: ReadonlyMap<string, number>, nowMs: number): Promise<void> {
    const peers = [...registered].filter(([node]) => node !== this.#self);
    for (const [node, member] of this.#members) {
      if (registered.has(node)) continue;
      this.#members.delete(node);
      if (!member.announced) this.#joined(node, member);
      const reason = member.expiresAt > nowMs ? 'stopped (it deregistered, or a new run on its data dir replaced it after a crash)' : 'registration lapsed (killed, hung, or cut off from Redis)';
      this.#logger.info({ peer: node, ...addressFields(member.address), ...buildFields(member.build), reason }, 'node left the cluster');
    }
    const fresh = peers.filter(([node]) => !this.#members.has(node));
    for (const [node, expiresAt] of peers) {
      const known = this.#members.get(node);
      if (known !== undefined) known.expiresAt = expiresAt;
      else this.#members.set(node, { expiresAt, address: undefined, build: undefined, announced: false, waited: 0 });
    }
    const waiting = [...this.#members].filter(([, m]) => !m.announced || m.address === undefined || m.build === undefined);
    const [addresses, builds] = waiting.length > 0
      ? await Promise.all([this.#addresses(), this.#buildsRead()])
      : [new Map<string, NodeAddress>(), new Map<string, BuildInfo | null>()];
    for (const [node, member] of waiting) {
      member.address ??= addresses.get(node);
      if (member.build === undefined) member.build = builds.get(node);
    }
    if (!this.#started) {
      // The nodes there when this one started: one line, not a join each.
      this.#started = true;
      for (const [, member] of this.#members) member.announced = true;
      if (fresh.length > 0) {
        const nodes = fresh.map(([node]) => {
          const member = this.#members.get(node);
          return { node, ...addressFields(member?.address), ...buildFields(member?.build) };
        });
        this.#logger.info({ nodes }, 'other nodes in the cluster at start');
      }
      return;
    }
    for (const [node, member] of waiting) {
      if (member.announced) continue;
      member.waited += 1;
      if (member.address !== undefined || member.waited >= JOIN_WAIT_RENEWALS) this.#joined(node, member);
    }
  }

  #joined(node: string, member: Member): void {
    member.announced = true;
    this.#logger.info({ peer: node, ...addressFields(member.address), ...buildFields(member.build) }, 'node joined the cluster');
  }
}

/** A node's address as log fields: `store` and `url`, as the record-read warnings name them (none when unknown). */
function addressFields(address: NodeAddress | undefined): { store?: string; url?: string } {
  return address === undefined ? {} : { store: address.storeId, url: address.url };
}

/**
 * A node's build as log fields: `version` and `commit`, both null for a node whose entry
 * names none (an older release), none when no entry was read.
 */
function buildFields(build: BuildInfo | null | undefined): { version?: string | null; commit?: string | null } {
  if (build === undefined) return {};
  return build === null ? { version: null, commit: null } : { version: build.version, commit: build.commit };
}
