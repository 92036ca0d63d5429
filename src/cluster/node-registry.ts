/**
 * Node registry (DESIGN.md §9): every node registers itself in Redis with a TTL
 * renewed by its own heartbeat, in a sorted set of node id → expiry. Presence readers
 * use it to drop the connections of nodes that died without cleaning up.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { redisCall, redisNowMs } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';
import { outageFields } from '../errors.js';
import { clockReading, type ClockReading } from './clock-skew.js';

/** How often a node renews its registration, ms (the gateway's registry; DESIGN.md §9). */
export const NODE_RENEW_MS = 5000;
/**
 * How long a registration lives after its last renewal, ms: three missed renewals. A
 * registration's score is its expiry, so it was last renewed this long before it
 * (`pixiu inspect cluster` shows when).
 */
export const NODE_TTL_MS = 3 * NODE_RENEW_MS;

/** A fresh node id: host, pid and a random suffix, `[A-Za-z0-9._-]` only. */
export function newNodeId(): string {
  const host = os.hostname().replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 40) || 'host';
  return `${host}-${process.pid}-${randomBytes(3).toString('hex')}`;
}

/** Options of {@link NodeRegistry}. */
export interface NodeRegistryOptions {
  readonly node: string;
  /** Renewal period, ms. */
  readonly intervalMs: number;
  /** A node not renewed for this long is gone, ms (a few intervals). */
  readonly ttlMs: number;
  readonly logger: Logger;
  /**
   * The connection the renewals use (and whose reconnect renews at once); default the
   * registry's. A node gives them one of their own (src/service/redis-start.ts), so that
   * they never wait behind its client traffic; the registry's reads stay on the other.
   */
  readonly renewals?: Redis;
  /**
   * A renewal found this node unregistered and registered it again: its registration
   * lapsed while it ran (renewals failed or were late for a TTL: Redis slow, a stall)
   * or Redis lost it (FLUSHALL, restarted empty). Other nodes have pruned (or Redis
   * dropped) its connections' presence entries meanwhile; the caller writes them back
   * now rather than at each connection's next heartbeat. The registry has logged the
   * lapse ({@link lapseLine}) before it calls this.
   */
  readonly onRegisteredAgain?: () => void;
  /**
   * The registry as each renewal read it: node id → registration expiry (ms, Redis's
   * clock; expired ones removed, this node included), and that renewal's Redis time.
   * Not called for the renewal run when Redis reconnects: the other nodes have not
   * written theirs back yet after a Redis that lost its data (membership-log.ts).
   */
  readonly onRegistry?: (registered: ReadonlyMap<string, number>, nowMs: number) => void;
  /**
   * This node's clock compared with Redis's `TIME` at each renewal that read it (the
   * first, at start, included): clock-skew.ts watches it (walk31 F3).
   */
  readonly onClock?: (reading: ClockReading) => void;
}

/** Why a renewal found this node's registration lapsed. */
export interface Lapse {
  /**
   * How late the renewal ran, ms (past its due time: an interval after the last renewal
   * that succeeded, or its timer's), when that explains the lapse: no renewal failed
   * since the last that succeeded, and it came more than the registration's lifetime
   * after it, or its timer fired more than an interval late (this node's event loop was
   * held). Undefined otherwise: Redis lost the registration, or renewals failed.
   */
  readonly lateMs: number | undefined;
  /** Renewals that failed since the last that succeeded. */
  readonly failedRenewals: number;
}

/**
 * The warning logged when this node registers again after a lapse: one that points at
 * the node itself when its own renewal ran late (an event loop held by a long request
 * or a stall: Redis was fine), else at Redis (docs/protocol.md uses the same words for
 * a FLUSHALL). Only the second was said before, also for a node held 20 s by its own
 * request parsing (a hostile-input newcomer's finding).
 */
export function lapseLine(lapse: Lapse): string {
  const after = 'presence and shared settings written back';
  if (lapse.lateMs === undefined) return `node registration had lapsed or was lost; ${after}`;
  const late = (lapse.lateMs / 1000).toFixed(1);
  return `this node's registration renewal ran ${late} s late (its event loop was held: a long request or a stall), so its registration lapsed; ${after}`;
}

/** This node's registration and a cached view of the live nodes. */
export class NodeRegistry {
  readonly node: string;
  readonly #redis: Redis;
  /** The renewals' connection ({@link NodeRegistryOptions.renewals}). */
  readonly #renewals: Redis;
  readonly #key: string;
  readonly #opts: NodeRegistryOptions;
  #live = new Set<string>();
  /**
   * Redis's clock minus this machine's, ms, as of the last renewal. Registrations are
   * scored, and judged lapsed, by Redis's clock: one clock for every node. With each
   * node's own, a node whose clock was ahead by more than the TTL less one renewal
   * (10 s) deleted the other nodes' registrations at its renewals, and every node then
   * took them for dead (their presence pruned).
   */
  #offset = 0;
  /**
   * Redis's `TIME` at the last renewal, ms, and `performance.now()` when its answer came:
   * {@link redisClock} counts on from them on a clock that never steps. At the answer,
   * not the middle of the round trip: Redis read its clock somewhere within it, so this
   * is a lower bound on Redis's time, the safe side for both its uses (review-clock R4:
   * anchored at the middle, a `TIME` Redis ran late in a slow round trip made it run
   * ahead of Redis by up to half of it).
   */
  #timeAt: { readonly redisMs: number; readonly monotonicMs: number } | undefined;
  /** True once a renewal has written this node's registration. */
  #registered = false;
  #timer: NodeJS.Timeout | undefined;
  /** When the last renewal that succeeded started, `performance.now()` ms (monotonic). */
  #renewedAt: number | undefined;
  /** When the renewal timer is next due, `performance.now()` ms (monotonic). */
  #dueAt = 0;
  /** Renewals that failed since the last that succeeded. */
  #failed = 0;
  /** The renewals of the timer and of a reconnect that have not ended ({@link stop} waits for them). */
  readonly #renewing = new Set<Promise<void>>();

  constructor(redis: Redis, keys: Keys, opts: NodeRegistryOptions) {
    this.#redis = redis;
    this.#renewals = opts.renewals ?? redis;
    this.#key = keys.nodes();
    this.#opts = opts;
    this.node = opts.node;
  }

  /**
   * Registers now, then renews every interval. A failed renewal logs and retries next time.
   * @param predecessor the node that ran this node's store before it and is gone: the
   *   node of the store lease the start judged left behind by a dead process
   *   (store-ownership.ts `leftBehind`: a process of this machine whose pid is gone, or a
   *   lease nobody renewed for 20 s). Its registration, which would live on for up to
   *   {@link NodeRegistryOptions.ttlMs} after it was killed, is removed in the first
   *   renewal, before that renewal reads the registry: it is not another node, and was
   *   counted as one (`other nodes in the cluster at start`, `pixiu_cluster_nodes`,
   *   `pixiu inspect cluster`, the stop's warning: leaving-others.ts). Logged at info
   *   when it was there.
   * @throws PixiuError UNAVAILABLE when Redis fails (the first registration)
   */
  async start(predecessor?: string): Promise<void> {
    await this.#renew(0, true, predecessor === this.node ? undefined : predecessor);
    this.#dueAt = performance.now() + this.#opts.intervalMs;
    this.#timer = setInterval(this.#onTimer, this.#opts.intervalMs);
    this.#timer.unref();
    // Registered again as soon as Redis is back: a Redis restarted empty would otherwise
    // know no node for up to an interval, and other nodes would take this one for gone.
    this.#renewals.on('ready', this.#renewOnReady);
  }

  /** Redis (re)connected: renews at once, not telling {@link NodeRegistryOptions.onRegistry}. */
  readonly #renewOnReady = (): void => this.#renewLogged(0, false);

  /** The renewal timer fired: renews, noting how late it fired (Node times the next from now). */
  readonly #onTimer = (): void => {
    const now = performance.now();
    const timerLateMs = Math.max(0, now - this.#dueAt);
    this.#dueAt = now + this.#opts.intervalMs;
    this.#renewLogged(timerLateMs);
  };

  readonly #renewLogged = (timerLateMs = 0, observe = true): void => {
    const renewal = this.#renew(timerLateMs, observe).catch((err: unknown) => {
      this.#failed += 1;
      this.#opts.logger.warn(outageFields(err), 'node registration renewal failed');
    }).finally(() => this.#renewing.delete(renewal));
    this.#renewing.add(renewal);
  };

  /**
   * How long a registration lives after its last renewal, ms ({@link NodeRegistryOptions.ttlMs};
   * {@link NODE_TTL_MS} on a node): a node killed is still taken for registered this long
   * at most after it died.
   */
  get ttlMs(): number {
    return this.#opts.ttlMs;
  }

  /** How often this node renews its registration, ms ({@link NodeRegistryOptions.intervalMs}; {@link NODE_RENEW_MS} on a node). */
  get intervalMs(): number {
    return this.#opts.intervalMs;
  }

  /** Whether a node is registered (as of the last renewal; this node always is). */
  isLive(node: string): boolean {
    return node === this.node || this.#live.has(node);
  }

  /**
   * Which of `nodes` are registered. The cached view of the last renewal answers for
   * the nodes it knows; when it does not know one, the registry is read again first.
   * Why: a node that registered after this node's last renewal is live but not yet in
   * the cache, and presence readers prune the entries of nodes they think are gone —
   * they would delete a new node's live connections (up to a renewal interval after
   * it started) and undercount the per-user connection limit.
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async liveAmong(nodes: Iterable<string>): Promise<ReadonlySet<string>> {
    const asked = new Set(nodes);
    if ([...asked].some((n) => !this.isLive(n))) {
      this.#live = new Set(await this.#readLive());
    }
    return new Set([...asked].filter((n) => this.isLive(n)));
  }

  /**
   * Whether `node` is registered now, read from Redis (not the cached view): for the
   * rare question "is a node that received nothing gone?".
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async isRegistered(node: string): Promise<boolean> {
    if (node === this.node) return true;
    const expiry = await redisCall(() => this.#redis.zscore(this.#key, node));
    return expiry !== null && Number(expiry) > this.now();
  }

  /**
   * The other nodes registered now, sorted: read from Redis, so a node that left since
   * the last renewal (up to {@link NodeRegistryOptions.intervalMs} ago) is not among
   * them; the last renewal's view when Redis fails. For a stop's warning that it leaves
   * other nodes waiting on its store (leaving-others.ts). Never rejects.
   */
  async othersNow(): Promise<string[]> {
    const live = await this.#readLive().catch(() => [...this.#live]);
    return live.filter((n) => n !== this.node).sort();
  }

  /**
   * The nodes whose registration has not expired by {@link now}, read from Redis.
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  #readLive(): Promise<string[]> {
    return redisCall(() => this.#redis.zrangebyscore(this.#key, `(${this.now()}`, '+inf'));
  }

  /** Now by Redis's clock as of the last renewal (this machine's clock plus the offset measured then), ms. */
  now(): number {
    return Date.now() + this.#offset;
  }

  /**
   * Now by Redis's clock, counted on from its `TIME` at the last renewal on the
   * monotonic clock, ms since the epoch: unlike {@link now}, it does not move with a
   * step of this machine's clock before the next renewal. Never ahead of Redis's clock
   * (counted from the answer; it lags it by where in the round trip Redis read it):
   * the floor of a message's expiry (src/store/record.ts) and the bound of a store's
   * sweeps and `client_msg_id` checks (src/store/sweep-clock.ts); an integer.
   * Undefined before the first renewal.
   */
  redisClock(): number | undefined {
    const at = this.#timeAt;
    return at === undefined ? undefined : Math.floor(at.redisMs + (performance.now() - at.monotonicMs));
  }

  /**
   * Stops renewing and deregisters, once the renewals under way have ended: one that
   * ended after the deregistration wrote the registration back, and its callbacks
   * (a lapse's `onRegisteredAgain`: the shared settings' write-back) ran on a stopped
   * node (redisrest F7). That wait is on Redis: a renewal is two commands in turn on the
   * renewals connection (Redis's TIME, then the pipeline), each bounded by that
   * connection's timeout (max(`PIXIU_REDIS_COMMAND_TIMEOUT`, LEASE_RENEW_MS): 5 s by
   * default), so with a hung Redis the stop may wait ~10 s for it before its ZREM, which
   * then times out on its own. A shutdown does not wait that long: its step holding this
   * stop is given up at its Redis bound (shutdown-steps.ts, service.ts `redisBound`), and
   * the registration then expires by its TTL. Never rejects.
   */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#renewals.off('ready', this.#renewOnReady);
    await Promise.all(this.#renewing);
    await redisCall(() => this.#redis.zrem(this.#key, this.node)).catch(() => undefined);
  }

  /**
   * @param timerLateMs how late the renewal timer fired, ms (0 for a renewal not of the timer)
   * @param observe whether {@link NodeRegistryOptions.onRegistry} is told what it read
   * @param predecessor a dead node's registration to remove before the read ({@link start})
   */
  async #renew(timerLateMs = 0, observe = true, predecessor?: string): Promise<void> {
    // Monotonic: how late a renewal ran is not to be judged by a wall clock an NTP step moves.
    const startedAt = performance.now();
    const redis = this.#renewals;
    const sentAt = Date.now();
    const now = await redisNowMs(redis);
    const answeredAt = Date.now();
    const roundTripMs = performance.now() - startedAt;
    this.#offset = now - answeredAt;
    this.#timeAt = { redisMs: now, monotonicMs: startedAt + roundTripMs };
    this.#opts.onClock?.(clockReading(sentAt, now, answeredAt, roundTripMs));
    // One connection, so Redis runs them in this order: the predecessor is gone before the read.
    const [before, , , removed, live] = await redisCall(() => Promise.all([
      redis.zscore(this.#key, this.node),
      redis.zadd(this.#key, String(now + this.#opts.ttlMs), this.node),
      redis.zremrangebyscore(this.#key, '-inf', String(now)),
      predecessor === undefined ? 0 : redis.zrem(this.#key, predecessor),
      redis.zrange(this.#key, '0', '-1', 'WITHSCORES'),
    ]));
    if (removed > 0) {
      this.#opts.logger.info({ node: this.node, predecessor },
        'registration of the previous run on this data dir removed: its process is gone (killed or crashed), so it is not another node');
    }
    const registered = new Map<string, number>();
    for (let i = 0; i + 1 < live.length; i += 2) registered.set(live[i] as string, Number(live[i + 1]));
    this.#live = new Set(registered.keys());
    if (observe) this.#opts.onRegistry?.(registered, now);
    // On any renewal but the first, a registration missing (another node removed it
    // once lapsed, or Redis lost it) or past its expiry had lapsed.
    if (this.#registered && (before === null || Number(before) <= now)) this.#lapsed(startedAt, timerLateMs);
    this.#registered = true;
    this.#renewedAt = startedAt;
    this.#failed = 0;
  }

  /** Logs a lapse found by the renewal started at `startedAt` ({@link lapseLine}), then tells the caller. */
  #lapsed(startedAt: number, timerLateMs: number): void {
    const { intervalMs, ttlMs } = this.#opts;
    const sinceMs = startedAt - (this.#renewedAt ?? startedAt);
    const ranLate = this.#failed === 0 && (sinceMs > ttlMs || timerLateMs > intervalMs);
    const lapse: Lapse = { lateMs: ranLate ? Math.max(timerLateMs, sinceMs - intervalMs) : undefined, failedRenewals: this.#failed };
    this.#opts.logger.warn({ node: this.node, ...lapse }, lapseLine(lapse));
    this.#opts.onRegisteredAgain?.();
  }
}
