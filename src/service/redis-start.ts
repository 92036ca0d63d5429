/**
 * The service's Redis, the first part it starts (DESIGN.md §1, §9): the one
 * `PIXIU_REDIS_URL` names, or without it an embedded redis-server in the data dir
 * (src/redis/local-server.ts); connected, its version required, and a shared one
 * checked for persistence and eviction (warnings, not refusals), at start and while
 * the node runs (src/redis/settings-watch.ts).
 */
import type { Redis } from 'ioredis';
import type { Metrics } from '../api/metrics.js';
import { LEASE_RENEW_MS } from '../cluster/lease-watch.js';
import { refuseEmbeddedAfterShared } from '../cluster/prefix-guard.js';
import { StartupError } from '../errors.js';
import { createRedis } from '../redis/client.js';
import { startLocalRedis, type LocalRedis } from '../redis/local-server.js';
import { redactUrl } from '../redis/url.js';
import { checkSettings } from '../redis/settings-check.js';
import { RedisSettingsWatch, SETTINGS_WATCH_MS } from '../redis/settings-watch.js';
import { requireRedisVersion } from '../redis/version-check.js';
import type { FoundLayout } from '../store/layout.js';
import type { StartContext } from './start-context.js';

/** The Redis a start connected to. */
export interface StartedRedis {
  /** The command connection: client traffic and most background work. */
  readonly redis: Redis;
  /**
   * The connection of the node's renewals alone (its store lease and claim, its node
   * registration: `pixiu:renewals`), so that they never wait behind client traffic: on
   * the command connection a renewal queued behind thousands of a reconnect herd's
   * commands (ioredis sends one auto-pipeline at a time), timed out and fenced the
   * node's writes (slowclient F1).
   */
  readonly renewals: Redis;
  /** Its URL, password included (log it with `redactUrl`). */
  readonly url: string;
  /** The embedded redis-server, when no URL was given; undefined on a shared Redis. */
  readonly local: LocalRedis | undefined;
}

/**
 * Starts (embedded) and connects to the service's Redis; its shutdown steps, the
 * client's QUIT and the embedded server's stop, go first in `start.cleanup` (they run
 * last). Redis connection errors are counted in `metrics` (`kind: connection`).
 * @param found the store layout of the data dir, as the start read it
 * @param onLocalRedis told the embedded redis-server as soon as it runs
 * @throws StartupError when Redis cannot be started or reached, is too old, or the data
 *   dir is of a cluster started without its Redis URL (prefix-guard.ts)
 */
export async function startRedis(
  start: StartContext, found: FoundLayout, metrics: Metrics, onLocalRedis?: (local: LocalRedis) => void,
): Promise<StartedRedis> {
  const { config, logger, cleanup, stopAsked } = start;
  let local: LocalRedis | undefined;
  let redisUrl = config.redisUrl;
  if (redisUrl === undefined) {
    // A data dir of a cluster started without its Redis URL would be an island (prefix-guard.ts).
    refuseEmbeddedAfterShared(config.dataDir, found);
    // The data dir's lock is the start's, taken before this (service.ts).
    local = await startLocalRedis({ dataDir: config.dataDir, logger, locked: true });
    redisUrl = local.url;
    const stopLocal = local.stop;
    cleanup.unshift({ what: 'local redis-server', run: stopLocal });
    onLocalRedis?.(local);
    stopAsked();
  }
  // The command connection and its version check, then the renewals' own connection (StartedRedis `renewals`).
  const shownUrl = redactUrl(redisUrl);
  // A stall met here is waited for, the step tried again every second (start-stall.ts).
  const stall = start.stalls.runner(shownUrl);
  const redis = await stall(() => connectRedis(start, redisUrl, metrics, 'pixiu', 'redis', config.redisCommandTimeoutMs));
  // On the first connection, before the second one: a Redis refusing INFO (an ACL user
  // without +info) or in cluster mode ends the start here, after ioredis's one notice for
  // the first connection's ready check ("Skipping the ready check because INFO command
  // fails"), where the renewals' connection, made first, printed it a second time.
  await stall(() => requireRedisVersion(redis, shownUrl));
  // A renewal's commands may take a renewal period, not the command timeout: a reply
  // read late (the event loop held by a flood of requests, a slow link) still confirms
  // the lease, since the writes' deadline runs from before the renewal was sent
  // (lease-watch.ts LEASE_FENCE_MS), however late its answer. Timed out at 2 s, each
  // renewal of a node held ~2 s at a time failed and its writes were fenced
  // (slowclient F6: one client pipelining GET /healthz on 20 connections).
  const renewals = await stall(() => connectRedis(start, redisUrl, metrics, 'pixiu:renewals', 'redis renewals', Math.max(config.redisCommandTimeoutMs, LEASE_RENEW_MS)));
  if (local === undefined) {
    const settings = await checkSettings(redis, shownUrl, logger, SETTINGS_WATCH_MS);
    // Read again while the node runs: a change at runtime is warned about too, and a
    // start-up read that failed for a moment is made again (settings-watch.ts).
    const watch = new RedisSettingsWatch(redis, shownUrl, logger, settings);
    watch.start();
    cleanup.unshift({ what: 'redis settings watch', run: () => Promise.resolve(watch.stop()) });
  }
  return { redis, renewals, url: redisUrl, local };
}

/**
 * Connects one of the service's Redis connections, counts its connection errors in
 * `metrics`, and puts its QUIT (bounded) first in `start.cleanup`.
 * @param name its name in `CLIENT LIST`
 * @param what its shutdown step's name
 * @param commandTimeoutMs how long each of its commands may take before it fails, ms
 * @throws StartupError when Redis cannot be reached, in createRedis's words (the URL
 *   without its password, and the reason)
 */
async function connectRedis(start: StartContext, url: string, metrics: Metrics, name: string, what: string, commandTimeoutMs: number): Promise<Redis> {
  const { logger, cleanup, stopAsked } = start;
  let redis: Redis;
  try {
    redis = await createRedis({ url, commandTimeoutMs, name, logger });
  } catch (err) {
    throw new StartupError((err as Error).message, { cause: err });
  }
  metrics.countConnectionErrors(redis);
  cleanup.unshift({ what, run: () => redis.quit().catch(() => redis.disconnect()), redis: { ...start.redisBound, giveUp: () => redis.disconnect() } });
  stopAsked();
  return redis;
}
