/**
 * This node's membership of the cluster (DESIGN.md §9), as the gateway runs it
 * (src/gateway/gateway.ts): its registration in the node registry, renewed on a timer
 * (node-registry.ts); the log of other nodes joining and leaving (membership-log.ts); the
 * check of the secrets of the nodes that join after it (joiner-secrets.ts); and its
 * shared settings, announced once it is registered, published again when Redis lost
 * them, and withdrawn at shutdown (shared-settings.ts).
 */
import type { Redis } from 'ioredis';
import type { Config } from '../config/config.js';
import type { Logger } from '../logger.js';
import type { Keys } from '../redis/keys.js';
import type { ClockReading } from './clock-skew.js';
import { JoinerSecretCheck } from './joiner-secrets.js';
import { MembershipLog } from './membership-log.js';
import { nodeBuilds } from './node-entry.js';
import { NODE_RENEW_MS, NODE_TTL_MS, NodeRegistry } from './node-registry.js';
import { PartitionClaims } from './partition-claims.js';
import type { NodeSecrets } from './secret-digests.js';
import { announceSharedSettings, type SharedSettingsAnnouncement } from './shared-settings.js';

/** What a node's membership is built from. */
export interface NodeMembershipOptions {
  readonly redis: Redis;
  /** The connection the registration's renewals use (node-registry.ts `renewals`). */
  readonly renewals: Redis;
  readonly keys: Keys;
  /** This node's id. */
  readonly node: string;
  readonly logger: Logger;
  /** This node's secrets' digests, compared with the other nodes' (secret-digests.ts); none: not compared. */
  readonly secrets?: NodeSecrets | undefined;
  /**
   * Called after each registration renewal of the registry's timer (every 5 s), with how
   * many live nodes it read (this one included), once the others are observed.
   */
  readonly onRenewed: (nodes: number) => void;
  /**
   * Called when this node finds its registration lost or lapsed (node-registry.ts
   * `onRegisteredAgain`), once its shared settings are being published again.
   */
  readonly onRegisteredAgain: () => void;
  /** This node's clock compared with Redis's at each renewal (node-registry.ts `onClock`). */
  readonly onClock?: (reading: ClockReading) => void;
}

/** What {@link NodeMembership.start} announces: the node's shared settings and whose they are. */
export interface AnnouncedSettings {
  readonly config: Config;
  /** This node's store (its id): the shared settings of an earlier node of it are not a live peer's. */
  readonly storeId?: string | undefined;
  /**
   * The node of this store left behind by a dead process (store-ownership.ts
   * `leftBehind`): its registration and its shared settings entry go.
   */
  readonly leftBehind?: string | undefined;
}

/** This node in the cluster: registered, observing the others, its settings announced. */
export class NodeMembership {
  /** This node's registration; the registry's view of the live nodes and Redis's clock. */
  readonly registry: NodeRegistry;
  readonly #opts: NodeMembershipOptions;
  /** The secrets of the nodes that join after this one, compared with its own; none without secrets to compare. */
  readonly #joiners: JoinerSecretCheck | undefined;
  /** This node's shared settings in Redis, once published. */
  #settings: SharedSettingsAnnouncement | undefined;
  /**
   * A write-back of the shared settings is owed: set when the registration is found
   * lost, cleared when a write-back starts, set again when it fails (or a loss comes
   * while it runs); one owed is tried at each renewal.
   */
  #owed = false;
  /** The write-back under way, if any ({@link stop} waits for it). */
  #writeBack: Promise<void> | undefined;
  /** True once {@link stop} began: no write-back starts after it. */
  #stopping = false;

  constructor(opts: NodeMembershipOptions) {
    const { redis, renewals, keys, node, logger, secrets } = opts;
    this.#opts = opts;
    // Other nodes joining and leaving, logged at info with their store, URL and build (membership-log.ts).
    const claims = new PartitionClaims(redis, keys);
    const membership = new MembershipLog(logger, node, () => claims.leasesByNode(), () => nodeBuilds(redis, keys));
    this.#joiners = secrets === undefined ? undefined
      : new JoinerSecretCheck({ redis, keys, self: node, secrets, logger, addresses: () => claims.leasesByNode() });
    this.registry = new NodeRegistry(redis, keys, {
      node, intervalMs: NODE_RENEW_MS, ttlMs: NODE_TTL_MS, logger, renewals, onClock: opts.onClock,
      // The registry as this renewal read it (this node included): no read of its own per scrape.
      onRegistry: (registered, nowMs) => {
        void membership.observe(registered, nowMs);
        void this.#joiners?.observe(registered);
        // A write-back that failed (Redis not ready yet as it came back empty) is tried again.
        if (this.#owed) this.#republish(true);
        opts.onRenewed(registered.size);
      },
      // Logged by the registry, saying whether this node's renewal ran late (lapseLine).
      onRegisteredAgain: () => {
        this.#owed = true;
        this.#republish(false);
        opts.onRegisteredAgain();
      },
    });
  }

  /**
   * Publishes the shared settings (and the build, node-entry.ts) again, unless a
   * write-back runs; one that fails is tried again at the next renewal, until one is
   * done after the last loss. Once, it was not: a node whose write-back found Redis not
   * ready yet as it came back empty stayed without its entry, and `inspect cluster`
   * showed it as a release too old to name its build (walk24 L3). A retry's failure is
   * logged at debug (review35b F1: a warn line at every renewal while Redis refuses it).
   * @param retry whether this is a write-back tried again at a renewal
   */
  #republish(retry: boolean): void {
    const settings = this.#settings;
    if (settings === undefined || this.#writeBack !== undefined || this.#stopping) return;
    this.#owed = false;
    this.#writeBack = settings.republish(retry).then((published) => {
      this.#writeBack = undefined;
      if (!published) this.#owed = true;
    });
  }

  /**
   * Registers this node (removing the registration of the store's dead predecessor,
   * `leftBehind`), announces its shared settings (comparing them with the other
   * nodes': shared-settings.ts) and starts the check of joiners' secrets.
   * @throws PixiuError UNAVAILABLE when Redis cannot be reached (the registration)
   */
  async start(announced: AnnouncedSettings): Promise<void> {
    const { redis, keys, logger, secrets } = this.#opts;
    // The store's dead predecessor is no other node: its registration goes at once (node-registry.ts).
    await this.registry.start(announced.leftBehind);
    this.#settings = await announceSharedSettings(redis, keys, this.registry, announced.config, logger, {
      storeId: announced.storeId, leftBehind: announced.leftBehind, secrets,
      // Compared here: the check of joiners leaves them out, and checks the others (registered, no entry yet).
      onCompared: (nodes) => this.#joiners?.compared(nodes),
    });
    this.#joiners?.start();
  }

  /**
   * Leaves the registry and withdraws the shared settings (shutdown), so that a
   * stopped node leaves no entry: no write-back starts once this is called (a renewal
   * under way that finds a lapse asks for none), and the one under way ends before the
   * withdrawal. It had rewritten the entry after it, left for other nodes to clean up
   * (redisrest F7). Never rejects.
   */
  async stop(): Promise<void> {
    this.#stopping = true;
    const withdraw = async (): Promise<void> => {
      await this.#writeBack;
      await this.#settings?.withdraw();
    };
    await Promise.all([this.registry.stop(), withdraw()]);
  }
}
