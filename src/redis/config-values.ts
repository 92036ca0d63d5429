/**
 * Reading Redis's settings with `CONFIG GET`: the one reader of the start-up check
 * (settings-check.ts), the runtime watch (settings-watch.ts) and the eviction sign
 * (persistence-check.ts), and the one parser of its reply.
 */
import type { Redis } from 'ioredis';

/**
 * The values of the settings `names` (`appendonly`, `maxmemory-policy` …), read with
 * one `CONFIG GET` (Redis 7 takes several names): a map from each name Redis answered
 * to its value. A name this Redis does not answer (unknown to it, or hidden by a
 * managed service) is missing from the map. Never rejects: a failure is answered as
 * its error, for the caller to tell a refusal for good (command-refusal.ts
 * `refusalOf`: NOPERM, CONFIG renamed away) from one that may pass (a timeout, a
 * closed connection, LOADING).
 */
export async function configValues(redis: Redis, ...names: string[]): Promise<ReadonlyMap<string, string> | Error> {
  let reply: unknown;
  try {
    reply = await redis.config('GET', ...names);
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
  const values = new Map<string, string>();
  if (!Array.isArray(reply)) return values;
  for (let i = 0; i + 1 < reply.length; i += 2) values.set(String(reply[i]), String(reply[i + 1]));
  return values;
}
