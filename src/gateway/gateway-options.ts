/**
 * What the gateway is built from (gateway.ts `Gateway.start`): the node's Redis
 * connections, its inbox and store, client token verification, logging and metrics.
 */
import type { Redis } from 'ioredis';
import type { TokenVerifier } from '../auth/jwt.js';
import type { NodeSecrets } from '../cluster/secret-digests.js';
import type { Config } from '../config/config.js';
import type { Inbox } from '../inbox/inbox.js';
import type { Logger } from '../logger.js';
import type { Keys } from '../redis/keys.js';
import type { RecordReader } from '../store/record-reader.js';
import type { Metrics } from '../api/metrics.js';

/** What the gateway is built from. */
export interface GatewayOptions {
  readonly config: Config;
  /** The command connection. */
  readonly redis: Redis;
  /** The connection of the node's renewals alone (src/service/redis-start.ts): its registration's. */
  readonly renewals: Redis;
  /** URL for the gateway's own subscriber connection. */
  readonly redisUrl: string;
  readonly keys: Keys;
  readonly inbox: Inbox;
  /** Message records, wherever their partition is (src/cluster/store-router.ts). */
  readonly store: RecordReader;
  readonly verify: TokenVerifier;
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** This node's store (its id): the shared settings of an earlier node of it are not a live peer's (src/cluster/shared-settings.ts). */
  readonly storeId?: string;
  /** The node of this store whose lease the start found left behind by a dead process (store-ownership.ts `leftBehind`): its registration and shared settings entry go. */
  readonly storeLeftBehind?: string;
  /** This node's secrets' digests, compared with the other nodes' (src/cluster/secret-digests.ts). */
  readonly secrets?: NodeSecrets;
  /**
   * Called when this node finds its registration lost or lapsed (Redis lost its data —
   * FLUSHALL, restarted empty —, or the node was cut off for longer than its TTL): what
   * else the node keeps in Redis is to be written back too (the service's cluster secret).
   */
  readonly onRegisteredAgain?: () => void;
  /**
   * Called after each registration renewal of the node registry's timer (every 5 s):
   * what else the node re-reads from Redis at that pace (the inbox generation,
   * src/inbox/generation.ts).
   */
  readonly onRenewed?: () => void;
}
