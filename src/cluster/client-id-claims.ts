/**
 * `client_msg_id` across nodes (DESIGN.md §3: "storing the same client_msg_id again
 * returns the first MsgID and stores nothing"; §9). Each store keeps its own index of
 * the ids it stored, so on a Redis shared by several stores (data dirs) the same
 * `client_msg_id` sent to two nodes — a producer failing over after its node crashed,
 * a load balancer spreading retries — was stored twice and delivered twice. Here a
 * store claims each `client_msg_id` in Redis before it stores the message:
 *
 * - `<prefix>cmid:{<client_msg_id>}` holds `P|<store id>` while that store writes the
 *   message (`SET NX GET`, expiring after {@link PENDING_MS}), then the MsgID, kept as
 *   long as the message is;
 * - a node that finds another store's MsgID answers the retry with it (the record read
 *   from that store, as every read of another node's message is); one that finds
 *   another store's pending claim answers 503 (the first attempt is being stored; retry);
 * - its own claim, pending or settled, is left to its own store's index.
 *
 * Only while the Redis is shared by more than one store (its store descriptions,
 * src/cluster/partition-claims.ts, re-read every {@link REFRESH_MS}): a single node pays
 * no round trip for it. Known window: a message stored before a second store first
 * started, retried on that store afterwards, is stored twice (docs/decisions.md,
 * "Several nodes").
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { outageFields } from '../errors.js';
import { redisCall } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';

/** How long a claim stays pending without its store settling it (a node that crashed mid-write), ms. */
export const PENDING_MS = 30_000;
/** How often whether other stores share the Redis is read again, ms. */
export const REFRESH_MS = 5_000;

/** What a claim found. */
export type ClaimAnswer =
  /** This store holds the claim now (made by this call, or its own from before): store it here. */
  | { readonly state: 'mine' }
  /** Another store is storing a message under it now (or crashed doing so, until {@link PENDING_MS}). */
  | { readonly state: 'pending'; readonly storeId: string }
  /** A message is stored under it: its MsgID (maybe this store's own). */
  | { readonly state: 'stored'; readonly id: string };

/** Claims of `client_msg_id`s by this node's store. */
export class ClientIdClaims {
  readonly #redis: Redis;
  readonly #keys: Keys;
  readonly #pending: string;
  readonly #logger: Logger | undefined;
  #shared = false;
  #timer: NodeJS.Timeout | undefined;

  /**
   * @param storeId this node's store (src/store/layout.ts)
   */
  constructor(redis: Redis, keys: Keys, storeId: string, logger?: Logger) {
    this.#redis = redis;
    this.#keys = keys;
    this.#pending = `P|${storeId}`;
    this.#logger = logger;
  }

  /** True while other stores share the Redis: ingest claims each `client_msg_id` then. */
  get active(): boolean {
    return this.#shared;
  }

  /**
   * Reads whether other stores share the Redis, now and every {@link REFRESH_MS}.
   * @throws PixiuError UNAVAILABLE when the first read fails
   */
  async start(): Promise<void> {
    await this.#refresh();
    this.#timer = setInterval(() => {
      this.#refresh().catch((err: unknown) => this.#logger?.warn(outageFields(err), 'reading the stores sharing Redis failed'));
    }, REFRESH_MS);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /**
   * Claims `clientMsgId` for this store unless it is claimed already.
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async claim(clientMsgId: string): Promise<ClaimAnswer> {
    const key = this.#keys.clientIdClaim(clientMsgId);
    const prior = await redisCall(() => this.#redis.set(key, this.#pending, 'PX', PENDING_MS, 'NX', 'GET'));
    if (prior === null || prior === this.#pending) return { state: 'mine' };
    if (prior.startsWith('P|')) return { state: 'pending', storeId: prior.slice(2) };
    return { state: 'stored', id: prior };
  }

  /**
   * Records that `clientMsgId` names MsgID `id`, until `expiresAt` (the message's).
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async settle(clientMsgId: string, id: string, expiresAt: number): Promise<void> {
    const key = this.#keys.clientIdClaim(clientMsgId);
    await redisCall(() => this.#redis.set(key, id, 'PXAT', Math.max(expiresAt, Date.now() + 1)));
  }

  /** Drops this store's pending claim after its write failed, so a retry anywhere goes on at once. Never rejects. */
  async release(clientMsgId: string): Promise<void> {
    const key = this.#keys.clientIdClaim(clientMsgId);
    try {
      if ((await redisCall(() => this.#redis.get(key))) === this.#pending) await redisCall(() => this.#redis.del(key));
    } catch {
      // It expires on its own after PENDING_MS.
    }
  }

  async #refresh(): Promise<void> {
    const stores = await redisCall(() => this.#redis.hlen(this.#keys.storeDescriptions()));
    this.#shared = stores > 1;
  }
}
