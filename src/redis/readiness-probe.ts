/**
 * The write `GET /readyz` sends to Redis (src/api/routes/health.ts): a Redis that
 * answers but refuses writes — full under `maxmemory-policy noeviction` (OOM), or a
 * read-only replica after a failover — takes no message either, which PING would not
 * show. `PSETEX`, a command nothing else in Pixiu sends, so that it can be kept out of
 * ioredis's auto-pipelining (src/redis/client.ts) without un-pipelining every `SET`:
 * auto-pipelined, it would wait for the pipeline in flight before it, and with Redis
 * hung /readyz would answer after two command timeouts instead of one.
 *
 * `/readyz` needs no token, so its writes are bounded (src/api/shared-probe.ts;
 * secaudit F6: one anonymous client made 5–14 k PSETEX a second, ~1 MB/s of AOF).
 */
import type { Redis } from 'ioredis';

/** How long the probe's key lives, ms: every probe writes it again. */
export const PROBE_TTL_MS = 60_000;

/** The command the probe sends, for `autoPipeliningIgnoredCommands`. */
export const PROBE_COMMAND = 'psetex';

/**
 * Writes `key` (`1`, for {@link PROBE_TTL_MS}).
 * @throws ReplyError when Redis refuses the write (OOM, READONLY); the connection's
 *   errors (closed, command timeout) otherwise
 */
export async function writeReadinessProbe(redis: Redis, key: string): Promise<void> {
  await redis.psetex(key, PROBE_TTL_MS, '1');
}
