/**
 * The cluster secret (DESIGN.md §9): what nodes present to each other's internal
 * routes (`Authorization: Bearer <secret>`), kept in Redis so that every node sharing
 * the Redis (and key prefix) trusts the others whatever its own API token. The first
 * node to start creates it (`SET NX` of a random value); the others read it.
 *
 * If Redis loses it (FLUSHALL, a Redis without persistence restarted), the nodes agree
 * again on their own: a node that is refused, or that is shown a secret it does not
 * hold, re-reads it from Redis — writing its own back first if the key is gone — at
 * most once a second.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { bearerMatches, secretDigest } from '../auth/api-token.js';
import { redisCall } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';

/** Least time between two re-reads of the secret from Redis, ms. */
export const SECRET_REFRESH_MIN_MS = 1000;

/** This node's copy of the cluster secret. */
export class ClusterSecret {
  readonly #redis: Redis;
  readonly #key: string;
  #secret: string;
  #digest: Buffer;
  #lastRefresh = 0;
  #refreshing: Promise<boolean> | undefined;

  private constructor(redis: Redis, key: string, secret: string) {
    this.#redis = redis;
    this.#key = key;
    this.#secret = secret;
    this.#digest = secretDigest(secret);
  }

  /**
   * Reads the secret from Redis, creating it when there is none.
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  static async load(redis: Redis, keys: Keys): Promise<ClusterSecret> {
    const key = keys.clusterSecret();
    const secret = await writeIfMissing(redis, key, randomBytes(32).toString('base64url'));
    return new ClusterSecret(redis, key, secret);
  }

  /** The `Authorization` header value to send to other nodes. */
  get header(): string {
    return `Bearer ${this.#secret}`;
  }

  /**
   * Whether `header` carries the secret (constant-time). When it does not, the secret
   * is re-read from Redis (at most once a second) in case it changed, and checked again.
   * Never rejects: when Redis fails, the copy held is what counts.
   */
  async verify(header: string | undefined): Promise<boolean> {
    if (bearerMatches(header, this.#digest)) return true;
    if (header === undefined || !(await this.refresh().catch(() => false))) return false;
    return bearerMatches(header, this.#digest);
  }

  /**
   * Re-reads the secret from Redis (writing this node's copy back when the key is
   * gone). At most once per {@link SECRET_REFRESH_MIN_MS}; concurrent calls share one.
   * @returns true when the secret changed
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  refresh(): Promise<boolean> {
    if (this.#refreshing !== undefined) return this.#refreshing;
    if (performance.now() - this.#lastRefresh < SECRET_REFRESH_MIN_MS) return Promise.resolve(false);
    return this.#reread();
  }

  /**
   * Writes this node's copy back when Redis has none (it lost its data: the node found
   * its registration gone), whenever the last re-read was — unlike {@link refresh},
   * which a refused peer may call at any rate. Concurrent calls share one.
   * @returns true when Redis held another secret (another node wrote its own first), which this node now uses
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  writeBack(): Promise<boolean> {
    return this.#refreshing ?? this.#reread();
  }

  /** SET NX of this node's copy, then adopts what Redis holds. */
  #reread(): Promise<boolean> {
    this.#lastRefresh = performance.now();
    this.#refreshing = (async () => {
      try {
        const secret = await writeIfMissing(this.#redis, this.#key, this.#secret);
        if (secret === this.#secret) return false;
        this.#secret = secret;
        this.#digest = secretDigest(secret);
        return true;
      } finally {
        this.#refreshing = undefined;
      }
    })();
    return this.#refreshing;
  }
}

/** `SET key value NX`, then the value the key holds. */
async function writeIfMissing(redis: Redis, key: string, value: string): Promise<string> {
  return redisCall(async () => {
    const [, held] = await Promise.all([redis.set(key, value, 'NX'), redis.get(key)]);
    return held ?? value;
  });
}
