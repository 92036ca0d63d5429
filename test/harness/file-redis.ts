/**
 * A private redis-server for one test file: started in `before`, with a clean-up list
 * for the services and clients the file starts on it, run in `after` before the
 * server is destroyed (even when a clean-up step fails, or the run would hang).
 */
import { after, before } from 'node:test';
import { cleanupList, type CleanupList } from './pixiu-server.js';
import { RedisServer } from './redis-server.js';

/** What {@link fileRedis} hands the file's `setup`. */
export interface FileRedis {
  readonly redis: RedisServer;
  /** Steps run in `after`, last added first. */
  readonly cleanup: CleanupList;
}

/**
 * Registers the file's `before` (start a redis-server, then `setup` on it) and its
 * `after` (clean-up, then the server is destroyed).
 */
export function fileRedis(setup: (ctx: FileRedis) => Promise<void>, opts: { aof?: boolean } = {}): void {
  let redis: RedisServer | undefined;
  const cleanup = cleanupList();
  before(async () => {
    redis = await RedisServer.start(opts);
    await setup({ redis, cleanup });
  });
  after(async () => {
    try {
      await cleanup.run();
    } finally {
      await redis?.destroy();
    }
  });
}
