/**
 * Store partition claims and leases in Redis (DESIGN.md §2, §9): which store (one data
 * dir) holds which MsgID partition bytes, and where the node running a store can be
 * asked for its records.
 *
 * - A claim is permanent: partition number → store id, in one hash, taken by
 *   `lua/partition-claim-3.lua` (lowest free aligned block on a data dir's first
 *   start, re-asserted on every start and heartbeat). No two stores hold one
 *   partition, so no two nodes mint the same MsgID.
 * - A lease is temporary: store id → `{url, node}` with a TTL, renewed by the node's
 *   heartbeat. A claimed partition whose store has no lease is owned by a node that
 *   is not running: its records cannot be read now (UNAVAILABLE), they are not gone.
 */
import type { Redis } from 'ioredis';
import { connectRefusal, redisCall, redisNowMs } from '../redis/client.js';
import { DELETE_IF, deleteIf } from '../redis/delete-if.js';
import type { Keys } from '../redis/keys.js';
import { loadScripts, evalScript, type ScriptSpec } from '../redis/scripts.js';
import { RETIRED_STORE } from './store-directory.js';

/** MsgID partition bytes in all (DESIGN.md §2: an 8-bit partition). */
export const PARTITION_SPACE = 256;

/** The claim scripts; each header documents KEYS, ARGV and reply. */
export const CLAIM_SCRIPTS = {
  /** KEYS partitions, stores; ARGV storeId, count, base ('' to claim), description. Replies as {@link parseClaimReply} reads. */
  claim: { file: new URL('./lua/partition-claim-3.lua', import.meta.url), numberOfKeys: 2 },
  /** KEYS minted hash; ARGV partition, counter pairs. */
  raiseMinted: { file: new URL('./lua/minted-raise-1.lua', import.meta.url), numberOfKeys: 1 },
} as const satisfies Record<string, ScriptSpec>;

/** What a store tells others about itself, for their error messages. */
export interface StoreDescription {
  /** Absolute path of its store folder (`<dataDir>/xiu`). */
  readonly dir: string;
  /** Host name of the machine it was last started on. */
  readonly host: string;
}

/** Where a running store can be read: the value of its lease. */
export interface StoreLease {
  /** Base URL of the node's HTTP server (PIXIU_ADVERTISE_URL), e.g. `http://10.0.0.5:8080`. */
  readonly url: string;
  /** The node id (src/cluster/node-registry.ts): new on every start. */
  readonly node: string;
  /**
   * The host name, PID namespace (`/proc/self/ns/pid`, where there is one), boot id
   * (`/proc/sys/kernel/random/boot_id`, where there is one) and process id of the node,
   * to tell at start whether a lease left on this machine belongs to a process still
   * alive (src/cluster/lease-watch.ts); absent in leases of older releases (`boot` in
   * all before it was added).
   */
  readonly host?: string;
  readonly pidns?: string;
  readonly boot?: string;
  readonly pid?: number;
  /** Writes of this lease by its node so far: a starting node sees a live one renew by it changing. */
  readonly renewal?: number;
}

/** A lease as it stands in Redis: its value and the ms left before it lapses. */
export interface LeaseState {
  readonly lease: StoreLease;
  readonly ttlMs: number;
}

/** The answer of a claim or re-assertion. */
export type ClaimAnswer =
  /**
   * The block `base .. base + count - 1` is this store's. `known`: this Redis had the
   * store's description before the call — false on a data dir's first claim, and for
   * a store with a base when Redis lost its data or is another Redis or key prefix
   * than the one the store ran with.
   */
  | { readonly kind: 'held'; readonly base: number; readonly known: boolean }
  /** `partition` of the block is held by store `owner`; nothing was written. */
  | { readonly kind: 'conflict'; readonly partition: number; readonly owner: string; readonly description: StoreDescription | undefined }
  /** No free block of the store's size is left among the 256 partitions. */
  | { readonly kind: 'full' };

/**
 * Reads the claim script's reply (see its header).
 * @throws Error for a reply of another shape (a script of another version)
 */
export function parseClaimReply(reply: readonly (number | string)[]): ClaimAnswer {
  const [status, a, b, c] = reply;
  if (status === 1 && typeof a === 'number') return { kind: 'held', base: a, known: b === 1 };
  if (status === -1) return { kind: 'full' };
  if (status === 0 && typeof a === 'number' && typeof b === 'string') {
    return { kind: 'conflict', partition: a, owner: b, description: parseDescription(typeof c === 'string' ? c : '') };
  }
  throw new Error(`unexpected partition claim reply ${JSON.stringify(reply)}`);
}

/** A store's description as written with its claim (the descriptions hash), or undefined when it is not one. */
export function parseDescription(text: string): StoreDescription | undefined {
  try {
    const value = JSON.parse(text) as Partial<StoreDescription> | null;
    if (typeof value?.dir === 'string' && typeof value.host === 'string') return { dir: value.dir, host: value.host };
  } catch {
    // An entry written by something else: say nothing about it.
  }
  return undefined;
}

/** The lease value, or undefined when absent or not a lease. */
export function parseLease(text: string | null): StoreLease | undefined {
  if (text === null) return undefined;
  try {
    const value = JSON.parse(text) as Partial<StoreLease> | null;
    if (typeof value?.url === 'string' && typeof value.node === 'string') {
      return {
        url: value.url, node: value.node,
        ...(typeof value.host === 'string' ? { host: value.host } : {}),
        ...(typeof value.pidns === 'string' ? { pidns: value.pidns } : {}),
        ...(typeof value.boot === 'string' ? { boot: value.boot } : {}),
        ...(Number.isSafeInteger(value.pid) ? { pid: value.pid } : {}),
        ...(Number.isSafeInteger(value.renewal) ? { renewal: value.renewal } : {}),
      };
    }
  } catch {
    // Not a lease: treated as none.
  }
  return undefined;
}

/** `8..15` (or `8` for a block of one): how messages name a block of partitions. */
export function partitionSpan(base: number, count: number): string {
  return count === 1 ? String(base) : `${base}..${base + count - 1}`;
}

/**
 * The error message for a claim that was not granted — at start (the refusal) and at a
 * running node's re-assertion (why its writes are suspended): names the data dir, the
 * partitions, and the other store with where it lives. A block an operator retired
 * ({@link RETIRED_STORE}: README "Several nodes") is held by no store: the message says
 * this data dir was declared gone for good and must not serve again (a tester's finding,
 * walk23 L3: it read "held by store retired" and advised retiring what was retired).
 * @param dir this store's folder
 * @param base the block this store holds (undefined on a first start)
 * @param count partitions per store (P)
 */
export function claimRefusal(dir: string, base: number | undefined, count: number, answer: ClaimAnswer): string {
  if (answer.kind === 'full') {
    return `the store in ${dir} cannot claim ${count} partitions: every block of ${count} among the ` +
      `${PARTITION_SPACE} MsgID partitions is held by another store (see docs/decisions.md, "Several nodes")`;
  }
  if (answer.kind === 'held') return `the store in ${dir} holds partitions ${partitionSpan(answer.base, count)}`;
  const where = answer.description === undefined ? '' : ` (store folder ${answer.description.dir} on host ${answer.description.host})`;
  const mine = base === undefined ? `${count} partitions` : `partitions ${partitionSpan(base, count)}`;
  if (answer.owner === RETIRED_STORE) {
    return `the store in ${dir} cannot claim ${mine}: partition ${answer.partition} of them was retired by an operator ` +
      '(set to "retired" in the partition claims: README, "Several nodes"), which declares this data dir gone for good: ' +
      'every message stored in it reads as missing on every node, and a retired partition is never claimed again. ' +
      'This data dir must not serve again: stop any node running on it and start the node on a new data dir, ' +
      'which claims a block of its own (see docs/decisions.md, "Several nodes")';
  }
  return `the store in ${dir} cannot claim ${mine}: partition ${answer.partition} is held by store ` +
    `${answer.owner}${where}; two stores on one Redis must not mint the same message ids. ` +
    'Give each node its own data dir, or if that store is gone for good, retire its partitions. ' +
    'If Redis lost its data (FLUSHALL, restarted empty) while this node was stopped, a new data dir may have taken this block: ' +
    'start this node on a new data dir (what its store holds was named only by the inboxes Redis lost) ' +
    '(see docs/decisions.md, "Several nodes")';
}

/** Claims, leases and owner lookups on one Redis under one key prefix. */
export class PartitionClaims {
  readonly #redis: Redis;
  readonly #keys: Keys;

  constructor(redis: Redis, keys: Keys) {
    loadScripts(redis, [...Object.values(CLAIM_SCRIPTS), DELETE_IF]);
    this.#redis = redis;
    this.#keys = keys;
  }

  /**
   * Why calls fail now when Redis refuses this client's connection (a password it
   * requires: client.ts `connectRefusal`), in plain words; undefined otherwise.
   */
  connectRefusal(): string | undefined {
    return connectRefusal(this.#redis);
  }

  /**
   * Claims a block of `count` partitions for `storeId` (base undefined: the lowest free
   * aligned block, or the one it already holds), or re-asserts the block at `base`.
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async claim(storeId: string, count: number, base: number | undefined, description: StoreDescription): Promise<ClaimAnswer> {
    await this.claimsAge();
    const reply = await redisCall(() => evalScript<(number | string)[]>(this.#redis, CLAIM_SCRIPTS.claim,
      [this.#keys.storePartitions(), this.#keys.storeDescriptions()],
      [storeId, String(count), base === undefined ? '' : String(base), JSON.stringify(description)]));
    return parseClaimReply(reply);
  }

  /**
   * Records the last counter `storeId` minted in each partition of its block
   * (`counters[i]` for partition byte `base + i`), never lowering a recorded one
   * (`lua/minted-raise-1.lua`).
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async recordMinted(storeId: string, base: number, counters: readonly number[]): Promise<void> {
    const pairs = counters.flatMap((c, i) => [String(base + i), String(c)]);
    if (pairs.length > 0) await redisCall(() => evalScript(this.#redis, CLAIM_SCRIPTS.raiseMinted, [this.#keys.storeMinted(storeId)], pairs));
  }

  /**
   * The ids of every store that ever claimed a block on this Redis (the descriptions
   * hash), for what any of them minted in a block ({@link mintedOf}).
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async storeIds(): Promise<string[]> {
    return redisCall(() => this.#redis.hkeys(this.#keys.storeDescriptions()));
  }

  /**
   * Where each running node can be read, from the stores' leases: node id → its store
   * and advertised URL (a node with no lease — starting, stopped — is not in it).
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async leasesByNode(): Promise<Map<string, { readonly storeId: string; readonly url: string }>> {
    const storeIds = await this.storeIds();
    const texts = storeIds.length === 0 ? [] : await redisCall(() => this.#redis.mget(...storeIds.map((id) => this.#keys.storeLease(id))));
    const byNode = new Map<string, { storeId: string; url: string }>();
    storeIds.forEach((storeId, i) => {
      const lease = parseLease(texts[i] ?? null);
      if (lease !== undefined) byNode.set(lease.node, { storeId, url: lease.url });
    });
    return byNode;
  }

  /** The key {@link recordMinted} writes, for the operator's message. */
  mintedKey(storeId: string): string {
    return this.#keys.storeMinted(storeId);
  }

  /**
   * The last counters `storeId` minted as recorded, partition byte → counter (empty
   * when none were: a new store, or Redis lost them).
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async mintedOf(storeId: string): Promise<Map<number, number>> {
    const raw = await redisCall(() => this.#redis.hgetall(this.#keys.storeMinted(storeId)));
    return new Map(Object.entries(raw).map(([p, c]) => [Number(p), Number(c)] as const).filter(([p, c]) => Number.isInteger(p) && Number.isSafeInteger(c)));
  }

  /**
   * How long ago the claims were first written since Redis last lost them (created or
   * flushed), ms by Redis's clock; marks it now (SET NX) when they were not, and
   * answers 0. Every claim and re-assertion marks it.
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async claimsAge(): Promise<number> {
    const now = await redisNowMs(this.#redis);
    const prior = await redisCall(() => this.#redis.set(this.#keys.claimsSince(), String(now), 'NX', 'GET'));
    const since = prior === null ? now : Number(prior);
    return Number.isFinite(since) ? Math.max(0, now - since) : 0;
  }

  /**
   * The store id holding `partition`, or null when no store claims it.
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async ownerOf(partition: number): Promise<string | null> {
    return redisCall(() => this.#redis.hget(this.#keys.storePartitions(), String(partition)));
  }

  /**
   * The lease of `storeId`: where its node is read; undefined when it has none (the
   * node is stopped, or missed its renewals).
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async leaseOf(storeId: string): Promise<StoreLease | undefined> {
    return parseLease(await redisCall(() => this.#redis.get(this.#keys.storeLease(storeId))));
  }

  /**
   * `storeId`'s lease and the ms left before it lapses; undefined when it has none.
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async leaseState(storeId: string): Promise<LeaseState | undefined> {
    const key = this.#keys.storeLease(storeId);
    // Sent together (auto-pipelined); a lease renewed between the two reads only looks
    // a little younger than it is.
    const [text, ttlMs] = await redisCall(() => Promise.all([this.#redis.get(key), this.#redis.pttl(key)]));
    const lease = parseLease(text);
    return lease === undefined || ttlMs < 0 ? undefined : { lease, ttlMs };
  }

  /** The text a lease is stored as: what {@link renewLease} writes and {@link releaseLease} compares. */
  static leaseText(lease: StoreLease): string {
    return JSON.stringify(lease);
  }

  /**
   * Writes `storeId`'s lease for `ttlMs` (SET … PX … GET, Redis 6.2+).
   * @returns the lease it replaced, if any
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async renewLease(storeId: string, lease: StoreLease, ttlMs: number): Promise<StoreLease | undefined> {
    return parseLease(await redisCall(() => this.#redis.set(this.#keys.storeLease(storeId), PartitionClaims.leaseText(lease), 'PX', ttlMs, 'GET')));
  }

  /**
   * Drops `storeId`'s lease (shutdown), so readers stop trying its node at once; with
   * `mine`, only while the lease is that one (src/redis/delete-if.ts: another node's
   * lease is left in place). Never rejects.
   */
  async releaseLease(storeId: string, mine?: StoreLease): Promise<void> {
    const key = this.#keys.storeLease(storeId);
    await (mine === undefined ? redisCall(() => this.#redis.del(key)) : deleteIf(this.#redis, key, PartitionClaims.leaseText(mine))).catch(() => undefined);
  }
}
