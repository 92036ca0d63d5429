/**
 * How a Redis keeps its data, in the words of the warnings about it (DESIGN.md §4:
 * "Redis must be configured to persist (AOF) wherever messages must survive a Redis
 * restart"): inboxes live only in Redis, so on a Redis that does not persist a restart
 * loses every inbox entry, and a message acknowledged with 201 never reaches a
 * recipient who was offline (its content stays in the store, unreachable); on one that
 * evicts, memory pressure drops them. The start-up check (settings-check.ts) and the
 * runtime watch (settings-watch.ts) read the settings and warn in these words. Also
 * how long Redis has run ({@link redisUptimeMs}) and whether it has evicted keys
 * ({@link evictionSign}).
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { redisCall } from './client.js';
import { configValues } from './config-values.js';

/** How a Redis persists, as `CONFIG GET appendonly` and `save` say. */
export type Persistence = 'aof' | 'snapshots' | 'none';

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

/** `CONFIG GET maxmemory`'s value as bytes; undefined when it is no number (or not answered). */
export function maxmemoryBytes(value: string | undefined): number | undefined {
  const bytes = value === undefined || value.trim() === '' ? Number.NaN : Number(value);
  return Number.isFinite(bytes) ? bytes : undefined;
}

/**
 * Logs at warn that Redis may evict keys, when `policy` is not `noeviction` (the
 * start-up's line, and settings-watch.ts's for a change at runtime); nothing for it.
 * Under memory pressure such a Redis drops inbox entries, ack cursors, epochs and
 * claims at random, silently; with `noeviction` a full Redis refuses writes instead,
 * and Pixiu answers them 503 with Retry-After (nothing acknowledged is lost), as BullMQ
 * and Sidekiq ask for their queues. With no `maxmemory` (0) nothing is evicted yet,
 * but a limit set later (CONFIG SET, a managed Redis's plan) starts it: the line says so.
 * A `maxmemory` not answered (a managed Redis hiding it, which most likely has one) or
 * not a number is said to be unknown, never taken as none (walk29 F6: "(none is now)"
 * for a Redis with 1 GB set behind a proxy hiding it).
 * @param maxmemory `CONFIG GET maxmemory`'s value (bytes; 0: none); undefined: not answered
 * @param fields the line's context (`redis`: the URL as logged, password removed; …)
 */
export function warnEviction(logger: Logger, policy: string, maxmemory: string | undefined, fields: Record<string, unknown>): void {
  if (policy === 'noeviction') return;
  const limit = maxmemoryBytes(maxmemory);
  const when = limit === undefined
    ? `when it reaches its maxmemory (not known: ${maxmemory === undefined ? 'this Redis did not answer CONFIG GET maxmemory' : `CONFIG GET maxmemory answered ${JSON.stringify(maxmemory.slice(0, 40))}, no number of bytes`})`
    : limit > 0 ? `when it reaches maxmemory (${limit} bytes)` : 'once a maxmemory is set (none is now)';
  logger.warn({ ...fields, maxmemoryPolicy: policy, ...(limit !== undefined ? { maxmemory: limit } : { unanswered: ['maxmemory'] }) },
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
  const read = await configValues(redis, 'maxmemory-policy');
  return { evictedKeys, policy: read instanceof Error ? undefined : read.get('maxmemory-policy') };
}
