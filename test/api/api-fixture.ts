/**
 * What the API tests started in `before` share: a private redis-server and the service
 * on it, in this process, on a real port; both stopped by the file's clean-up list.
 */
import type { ConfigOverrides } from '../../src/config/config.js';
import { startInProcess, type CleanupList, type InProcessServer } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

/**
 * Starts a redis-server of its own and the service on it with `overrides`; `files.run()`
 * stops the service, then the redis-server (registered first, so it stops last, even
 * when an earlier step fails).
 */
export async function startWithOwnRedis(files: CleanupList, overrides: ConfigOverrides = {}): Promise<InProcessServer> {
  const redis = await RedisServer.start();
  files.after(() => redis.destroy());
  return startInProcess(files, { ...overrides, redisUrl: redis.url });
}
