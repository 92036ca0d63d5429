/**
 * What a data dir says about the embedded Redis it ran with (src/redis/local-server.ts
 * keeps it under `<dataDir>/redis`), for the messages of a node started on it with
 * another Redis.
 */
import { stat } from 'node:fs/promises';
import path from 'node:path';

/**
 * For a node started with `PIXIU_REDIS_URL` on a data dir whose store that Redis does
 * not know (store-ownership.ts `checkKnown`): when the data dir holds the embedded
 * Redis's append-only files (`<dataDir>/redis/appendonly`, storage/redis.conf
 * `appenddirname`), it ran with the embedded Redis before and its inboxes are there.
 * @returns a sentence saying so, or undefined when there are none
 */
export async function embeddedRedisHint(dataDir: string): Promise<string | undefined> {
  const aof = path.join(dataDir, 'redis', 'appendonly');
  const found = await stat(aof).then((s) => s.isDirectory(), () => false);
  return found ? `this data dir holds the embedded Redis's files (${aof}): it ran with the embedded Redis, whose inboxes are there; start it without PIXIU_REDIS_URL to use them` : undefined;
}
