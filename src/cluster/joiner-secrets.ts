/**
 * A running node checks the secrets of each node that joins after it (DESIGN.md §9;
 * secret-digests.ts). The start-time check (shared-settings.ts) compares a starting
 * node's secrets with every live node's entry, and only the starting node logged a
 * difference: a node running when another started with another API token said
 * nothing, and in a rollback (a node of an older release started beside nodes of a
 * newer one, which cannot read their salted digests and logs a difference from each,
 * equal or not) no node of the newer release compared the older node's entry, so a
 * real difference went unreported, and an operator reading the running nodes' logs
 * saw nothing (an upgrade tester's finding).
 *
 * So at each renewal of its registration (node-registry.ts `onRegistry`, every 5 s)
 * a node notes the registered nodes whose entries it has not compared, and compares
 * each once its node-settings entry is there: its own secrets digested under the
 * joiner's salt (secret-digests.ts `differing`: async scrypt on the thread pool, one
 * after the other), or in the first scheme for an entry without a salt, as the start
 * does. Each secret that differs is logged at error with the start-time check's line
 * (`secretMismatchLine`, fields `secret`, `nodes`, `urls`), once per joining node; an
 * entry with no digests (a release before them) is named at info
 * (`secretsNotComparedLine`); the same secrets at debug.
 *
 * Once per node id: a node that stops and starts again has a new id and is checked
 * again; one whose registration lapsed, or was lost with Redis's data, and comes back
 * under its id is not (its secrets are those compared). The nodes whose entries the
 * start-time comparison read (or a write-back's after Redis lost the entries) are not
 * checked again; the nodes registered then without an entry yet (starting at the same
 * moment) are.
 *
 * A joiner registers before it writes its entry, and writes its store lease (its URL)
 * only once it listens: it is compared at the first renewal that finds its entry and
 * its lease, or its entry alone after {@link JOIN_WAIT_RENEWALS} renewals (as
 * membership-log.ts waits to name it); one with no entry after
 * {@link ENTRY_WAIT_RENEWALS} renewals (its start could not write it: Redis failed
 * then) is left uncompared, at debug.
 *
 * Bounded: at most {@link MAX_CHECKS_PER_RENEWAL} nodes are compared per renewal (two
 * scrypts each at most, about 30 ms of one thread-pool thread each), the others at the
 * next; a renewal that comes while the last one's checks run checks nothing (the next
 * one does). A flood of joins is worked off a few per renewal, never queued as scrypt
 * work; what is kept per node is a few numbers, for the registered nodes and those gone
 * for less than {@link FORGET_AFTER_RENEWALS} renewals.
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { redisCall } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';
import { JOIN_WAIT_RENEWALS, type AddressLookup, type NodeAddress } from './membership-log.js';
import { parseEntry } from './node-entry.js';
import { peerDigests, secretMismatchLine, secretsNotComparedLine, type NodeSecrets } from './secret-digests.js';

/** Nodes compared per renewal at most: each costs up to two scrypts (secret-digests.ts). */
export const MAX_CHECKS_PER_RENEWAL = 4;

/** Renewals a joiner's entry is waited for before the joiner is left uncompared (a minute). */
export const ENTRY_WAIT_RENEWALS = 12;

/**
 * Renewals a compared node may be missing from the registry and still be known by its
 * id (a minute): a registration lost with Redis's data comes back within a renewal or
 * two, and is not a join.
 */
export const FORGET_AFTER_RENEWALS = 12;

/** A registered node, as this check knows it. */
interface Peer {
  /** Compared (by this check or another), or left uncompared for want of an entry. */
  done: boolean;
  /** Renewals that found it registered since it was first seen, while checks run (not before {@link JoinerSecretCheck.start}). */
  seen: number;
  /** Consecutive renewals that did not find it registered, once done. */
  absent: number;
}

/** What {@link JoinerSecretCheck} compares with, and how it names the joiners. */
export interface JoinerSecretCheckOptions {
  readonly redis: Redis;
  readonly keys: Keys;
  /** This node's id (never checked). */
  readonly self: string;
  /** This node's secrets' digests and how to compare them (secret-digests.ts `nodeSecrets`). */
  readonly secrets: NodeSecrets;
  readonly logger: Logger;
  /** Node id → its store and URL, from the store leases (partition-claims.ts `leasesByNode`). */
  readonly addresses: AddressLookup;
}

/** The secrets of the nodes that join after this one, compared with this node's once each. */
export class JoinerSecretCheck {
  readonly #opts: JoinerSecretCheckOptions;
  readonly #peers = new Map<string, Peer>();
  #started = false;
  /** The checks of a renewal, while they run. */
  #running: Promise<void> | undefined;

  constructor(opts: JoinerSecretCheckOptions) {
    this.#opts = opts;
  }

  /**
   * Nodes whose entries another comparison has read (the start-time one, or a
   * write-back's: shared-settings.ts `onCompared`): not compared here.
   */
  compared(nodes: Iterable<string>): void {
    for (const node of nodes) {
      if (node !== this.#opts.self) this.#peers.set(node, { done: true, seen: 0, absent: 0 });
    }
  }

  /**
   * Starts checking, at the next renewal: once the start-time comparison has run (or
   * failed: then every node registered is checked here). Before, renewals only note the
   * nodes registered.
   */
  start(): void {
    this.#started = true;
  }

  /**
   * The registry as a renewal read it (node id → registration expiry; node-registry.ts
   * `onRegistry`). Notes the nodes that joined and left, then compares the joiners
   * that are ready, unless the last renewal's checks still run.
   * @returns when this renewal's checks are done; never rejects (a Redis failure is
   *   logged at debug, and the joiners are compared at a later renewal)
   */
  observe(registered: ReadonlyMap<string, number>): Promise<void> {
    for (const [node, peer] of this.#peers) {
      if (registered.has(node)) {
        peer.absent = 0;
        if (this.#started) peer.seen += 1;
      } else if (!peer.done || ++peer.absent > FORGET_AFTER_RENEWALS) {
        this.#peers.delete(node);
      }
    }
    for (const node of registered.keys()) {
      if (node !== this.#opts.self && !this.#peers.has(node)) this.#peers.set(node, { done: false, seen: this.#started ? 1 : 0, absent: 0 });
    }
    if (!this.#started || this.#running !== undefined) return this.#running ?? Promise.resolve();
    const run = this.#checkJoiners().catch((err: unknown) => {
      this.#opts.logger.debug({ err }, 'joining nodes\' secrets not compared now; at a later renewal');
    }).finally(() => {
      this.#running = undefined;
    });
    this.#running = run;
    return run;
  }

  /** Reads the entries of the joiners not yet compared and compares those ready, {@link MAX_CHECKS_PER_RENEWAL} at most. */
  async #checkJoiners(): Promise<void> {
    const waiting = [...this.#peers].filter(([, p]) => !p.done).map(([node]) => node);
    if (waiting.length === 0) return;
    const { redis, keys, addresses } = this.#opts;
    const [texts, leases] = await Promise.all([
      redisCall(() => redis.hmget(keys.nodeSettings(), ...waiting)),
      addresses().catch(() => new Map<string, NodeAddress>()),
    ]);
    let checks = 0;
    for (const [i, node] of waiting.entries()) {
      const peer = this.#peers.get(node);
      // Gone, or compared by a write-back, while an earlier one was compared.
      if (peer === undefined || peer.done) continue;
      const text = texts[i];
      const url = leases.get(node)?.url;
      if (text === null || text === undefined) {
        if (peer.seen < ENTRY_WAIT_RENEWALS) continue;
        peer.done = true;
        this.#opts.logger.debug({ peer: node }, 'a joining node wrote no shared-settings entry; its secrets are not compared');
      } else if (url !== undefined || peer.seen >= JOIN_WAIT_RENEWALS) {
        if (checks >= MAX_CHECKS_PER_RENEWAL) return;
        checks += 1;
        // Done before the scrypts: one that fails (out of memory) is not tried at every renewal.
        peer.done = true;
        await this.#compare(node, text, url);
      }
    }
  }

  /** Compares a joiner's entry with this node's secrets and logs what differs (see the module comment). */
  async #compare(node: string, text: string, url: string | undefined): Promise<void> {
    const { logger, secrets } = this.#opts;
    const urls = new Map(url === undefined ? [] : [[node, url]]);
    const fields = { nodes: [node], urls: [url ?? null] };
    const digests = peerDigests(parseEntry(text));
    if (digests === undefined) {
      logger.info(fields, secretsNotComparedLine([node], urls));
      return;
    }
    const differing = await secrets.differing(digests);
    // This node's generated secret was generated at its start, not now: named as the data dir's.
    const here: NodeSecrets = { ...secrets, generated: [] };
    for (const which of differing) logger.error({ secret: which, ...fields }, secretMismatchLine(which, here, digests, [node], urls));
    if (differing.length === 0) logger.debug({ peer: node }, 'a joining node\'s secrets are the same as this node\'s');
  }
}
