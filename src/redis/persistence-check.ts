/**
 * Start-up looks at the Redis Pixiu was given: how long it has run
 * ({@link redisUptimeMs}), and how it keeps its data (DESIGN.md §4: "Redis
 * must be configured to persist (AOF) wherever messages must survive a Redis
 * restart"). Inboxes live only in Redis: on a Redis that does not persist, a restart
 * loses every inbox entry, and a message acknowledged with 201 never reaches a
 * recipient who was offline (its content stays in the store, unreachable). Pixiu runs
 * anyway (a cache-only test setup is legitimate) but says so at warn, once.
 *
 * Read with `CONFIG GET`. A Redis that refuses it (an ACL user without `+config|get`,
 * the usual `+@all -@dangerous`) or renamed CONFIG away (as managed Redis services do)
 * cannot be checked: the start says so once at warn, with what to verify by hand
 * ({@link warnSettingsUnread}), where it logged two debug lines and the operator the
 * warnings exist for never saw one (walk24 M1). The embedded `redis-server` runs with
 * AOF on (storage/redis.conf), so it never warns.
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { redisCall } from './client.js';
import { commandRefusal } from './command-refusal.js';
import { cutText } from '../text-cut.js';

/** How a Redis persists, as `CONFIG GET appendonly` and `save` say. */
export type Persistence = 'aof' | 'snapshots' | 'none';

/**
 * Reads the persistence of `redis`: `aof` (appendonly yes), `snapshots` (RDB `save`
 * rules only: what was written since the last snapshot is lost on a restart), `none`.
 * @returns undefined when CONFIG cannot be used (refused, renamed, or Redis failed)
 */
export async function readPersistence(redis: Redis): Promise<Persistence | undefined> {
  try {
    const [appendonly, save] = await Promise.all([redis.config('GET', 'appendonly'), redis.config('GET', 'save')]) as [string[], string[]];
    return persistenceOf(appendonly[1], save[1]);
  } catch {
    return undefined;
  }
}

/**
 * The persistence `CONFIG GET appendonly` and `save` answered (`appendonly`, `save`:
 * their values); undefined when `appendonly` is neither `yes` nor `no` (not answered).
 */
export function persistenceOf(appendonly: string | undefined, save: string | undefined): Persistence | undefined {
  if (appendonly === 'yes') return 'aof';
  if (appendonly !== 'no') return undefined;
  return (save ?? '').trim() === '' ? 'none' : 'snapshots';
}

/**
 * Logs at warn that Redis persists as `persistence` says, when that is not AOF (the
 * start-up's line, and settings-watch.ts's for a change at runtime); nothing for AOF.
 * @param fields the line's context (`redis`: the URL as logged, password removed; …)
 */
export function warnPersistence(logger: Logger, persistence: Persistence, fields: Record<string, unknown>): void {
  if (persistence === 'none') {
    logger.warn({ ...fields, appendonly: 'no', save: '' }, 'Redis does not persist (appendonly no, no save rules): a Redis restart loses every inbox, and messages already acknowledged never reach recipients who were offline; run it with appendonly yes (DESIGN.md §4, storage/redis.conf)');
  } else if (persistence === 'snapshots') {
    logger.warn({ ...fields, appendonly: 'no' }, 'Redis persists by snapshots only (appendonly no): a Redis restart loses the inbox appends since the last snapshot, messages already acknowledged; run it with appendonly yes (DESIGN.md §4, storage/redis.conf)');
  }
}

/**
 * Logs at warn when `redis` does not persist with AOF, or does with `appendfsync no`
 * (README "What delivery promises" asks for `everysec` or `always`: with `no` the OS
 * flushes the appends when it likes, ~30 s on Linux, and a machine crash loses them:
 * walk24 L4); nothing when it persists with AOF fsynced. Nothing either when CONFIG
 * cannot be used ({@link warnSettingsUnread} says that). Never rejects.
 * @param url the Redis URL as logged (password removed)
 * @returns what was found (undefined: CONFIG could not be used)
 */
export async function warnUnlessPersistent(redis: Redis, url: string, logger: Logger): Promise<Persistence | undefined> {
  let reply: string[];
  try {
    reply = await redis.config('GET', 'appendonly', 'save', 'appendfsync') as string[];
  } catch {
    return undefined;
  }
  const values = new Map(reply.flatMap((v, i) => (i % 2 === 0 ? [[v, reply[i + 1] ?? ''] as const] : [])));
  const persistence = persistenceOf(values.get('appendonly'), values.get('save'));
  if (persistence !== undefined) warnPersistence(logger, persistence, { redis: url });
  if (persistence === 'aof' && values.get('appendfsync') === 'no') {
    logger.warn({ redis: url, appendfsync: 'no' }, 'Redis writes its AOF without fsync (appendfsync no): the OS flushes the appends when it likes (~30 s on Linux), '
      + 'and a crash of the machine loses those, messages already acknowledged; run it with appendfsync everysec or always (DESIGN.md §4, storage/redis.conf)');
  }
  return persistence;
}

/**
 * Logs at warn, once at start, that Redis's persistence and eviction settings could not
 * be read, why (Redis's refusal: `CONFIG GET` not allowed to the ACL user, CONFIG
 * renamed away), and what to verify by hand (see the module comment). Asks `CONFIG GET`
 * once more for the reason. Never rejects.
 * @param url the Redis URL as logged (password removed)
 */
export async function warnSettingsUnread(redis: Redis, url: string, logger: Logger): Promise<void> {
  const reason = await (redis.config('GET', 'appendonly') as Promise<unknown>).then(() => 'CONFIG GET failed, then answered', (err: unknown) => (err as Error).message);
  const why = /^NOPERM\b/.test(reason) ? 'CONFIG GET is not allowed to the ACL user of PIXIU_REDIS_URL (NOPERM; grant +config|get to have them checked)'
    : commandRefusal(new Error(reason)) !== undefined ? 'this Redis does not know CONFIG (renamed or disabled)'
      : cutText(reason.split('\n')[0] ?? '', 200);
  logger.warn({ redis: url, reason },
    `cannot check how Redis persists and evicts: ${why}. Make sure by hand that it runs with appendonly yes, appendfsync everysec (or always) and maxmemory-policy noeviction, `
    + 'or a Redis restart or eviction loses acknowledged messages; this node will not warn about them (DESIGN.md §4, storage/redis.conf)');
}

/** Redis's eviction settings, as `CONFIG GET maxmemory-policy` and `maxmemory` answered them. */
export interface EvictionSettings {
  /** `maxmemory-policy`: `noeviction`, `allkeys-lru` … */
  readonly policy: string;
  /** `maxmemory`, bytes; 0: none (nothing is evicted yet, whatever the policy); undefined when not answered as a number. */
  readonly maxmemory: number | undefined;
}

/** `CONFIG GET maxmemory`'s value as bytes; undefined when it is no number (or not answered). */
export function maxmemoryBytes(value: string | undefined): number | undefined {
  const bytes = value === undefined || value.trim() === '' ? Number.NaN : Number(value);
  return Number.isFinite(bytes) ? bytes : undefined;
}

/**
 * Logs at warn when `redis` may evict keys (`maxmemory-policy` other than
 * `noeviction`): under memory pressure it would drop inbox entries, ack cursors,
 * epochs and claims at random, silently — acknowledged messages lost and other users'
 * state reset. With `noeviction` a full Redis refuses writes instead, and Pixiu answers
 * them 503 with Retry-After (nothing acknowledged is lost). As BullMQ and Sidekiq do for
 * their queues. With no `maxmemory` (0) nothing is evicted yet, but a limit set later
 * (CONFIG SET, a managed Redis's plan) starts it: the warning says so. Nothing when
 * CONFIG cannot be used ({@link warnSettingsUnread} says that). Never rejects.
 * @param url the Redis URL as logged (password removed)
 * @returns the policy and maxmemory found (undefined: CONFIG could not be used)
 */
export async function warnIfEvicting(redis: Redis, url: string, logger: Logger): Promise<EvictionSettings | undefined> {
  let policy: string | undefined;
  let maxmemory: string | undefined;
  try {
    const [p, m] = await Promise.all([redis.config('GET', 'maxmemory-policy'), redis.config('GET', 'maxmemory')]) as [string[], string[]];
    policy = p[1];
    maxmemory = m[1];
  } catch {
    policy = undefined;
  }
  if (policy !== undefined) warnEviction(logger, policy, maxmemory, { redis: url });
  return policy === undefined ? undefined : { policy, maxmemory: maxmemoryBytes(maxmemory) };
}

/**
 * Logs at warn that Redis may evict keys, when `policy` is not `noeviction` (the
 * start-up's line, and settings-watch.ts's for a change at runtime); nothing for it.
 * @param maxmemory `CONFIG GET maxmemory`'s value (bytes; 0: none)
 * @param fields the line's context (`redis`: the URL as logged, password removed; …)
 */
export function warnEviction(logger: Logger, policy: string, maxmemory: string | undefined, fields: Record<string, unknown>): void {
  if (policy === 'noeviction') return;
  const limit = maxmemoryBytes(maxmemory);
  const when = limit !== undefined && limit > 0 ? `when it reaches maxmemory (${limit} bytes)` : 'once a maxmemory is set (none is now)';
  logger.warn({ ...fields, maxmemoryPolicy: policy, ...(limit !== undefined ? { maxmemory: limit } : {}) },
    `Redis may evict keys (maxmemory-policy ${policy}): ${when} it drops inbox entries, ack cursors and epochs silently, and messages already acknowledged are lost; `
    + 'run it with maxmemory-policy noeviction (a full Redis then refuses writes, and Pixiu answers 503 with Retry-After) (DESIGN.md §4, storage/redis.conf)');
}

/**
 * How long the Redis server has run, ms (`INFO server` uptime_in_seconds): a Redis
 * restarted moments ago may have come back empty, with the nodes that used it still
 * reconnecting (src/cluster/store-ownership.ts).
 * @throws PixiuError UNAVAILABLE when Redis fails
 */
export async function redisUptimeMs(redis: Redis): Promise<number> {
  const info = await redisCall(() => redis.info('server'));
  const seconds = Number(/^uptime_in_seconds:(\d+)/m.exec(info)?.[1]);
  return Number.isFinite(seconds) ? seconds * 1000 : Number.POSITIVE_INFINITY;
}

/** What Redis says of its evictions (F4: read only when a loss is found, never on a request's path). */
export interface EvictionSign {
  /** `INFO stats` `evicted_keys`: keys evicted since Redis started (or its stats were reset); above 0 here. */
  readonly evictedKeys: number;
  /** `CONFIG GET maxmemory-policy` now; undefined when CONFIG cannot be used (refused, renamed). */
  readonly policy: string | undefined;
}

/**
 * Whether Redis has evicted keys (`INFO stats` `evicted_keys` above 0), with its
 * eviction policy now: read when a node finds keys gone (its store's claim), to name
 * eviction as the likely cause, where the line named only a FLUSHALL or a restart
 * without AOF though Redis had been set to `allkeys-lru` at runtime (a black-box SRE's
 * finding). Never rejects.
 * @returns undefined when Redis evicted nothing, or cannot be read
 */
export async function evictionSign(redis: Redis): Promise<EvictionSign | undefined> {
  let evictedKeys: number;
  try {
    evictedKeys = Number(/^evicted_keys:(\d+)/m.exec(await redis.info('stats'))?.[1] ?? 0);
  } catch {
    return undefined;
  }
  if (!(evictedKeys > 0)) return undefined;
  const policy = await (redis.config('GET', 'maxmemory-policy') as Promise<string[]>).then((reply) => reply[1], () => undefined);
  return { evictedKeys, policy };
}
