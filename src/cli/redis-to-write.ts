/**
 * The Redis an operator's command writes to (`pixiu redis lost-writes`): the configured
 * `PIXIU_REDIS_URL`; else the embedded one of the data dir — the one running there, when
 * its socket is there and its pid file names a live process (a serving node's, or one
 * left running by a node killed outright, which no probe here tells apart: written to
 * where it runs and left running, and the node started next takes it over), or, on a
 * stopped data dir (a restore, before its first start: README "Backups and restores"), an
 * embedded redis-server started for the command the way `serve` starts it
 * (src/redis/local-server.ts: the data dir's lock, the same `storage/redis.conf`) and
 * stopped again once the command is done, its AOF written. Unlike the inspect commands
 * (inspect-redis.ts), which never start one: a read of a stopped data dir has nothing to
 * wait for, a restore does.
 */
import { existsSync, readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import type { Redis } from 'ioredis';
import type { Config } from '../config/config.js';
import { StartupError } from '../errors.js';
import { isAlive } from '../process-alive.js';
import { redactUrl } from '../redis/url.js';
import { connectToRead, embeddedRedisSocket } from './inspect-redis.js';

/** A Redis connection to write to, and how to let it go. */
export interface RedisToWrite {
  readonly redis: Redis;
  /** The Redis in words, for the command's line: its URL without password, or the data dir's embedded one. */
  readonly where: string;
  /** True when the command started the embedded redis-server itself (the data dir's node is stopped). */
  readonly started: boolean;
  /** What the operator does next, the command's last words: start the node, repoint or restart the nodes, or either (a running embedded Redis). */
  readonly next: string;
  /** Disconnects; stops the redis-server the command started (SIGTERM: it writes its AOF), waiting for its exit. */
  close(): Promise<void>;
}

/**
 * Connects to the Redis to write to (see the module's doc).
 * @throws StartupError as {@link connectToRead} for a URL or a running node's Redis;
 *   for a stopped data dir: no `<dataDir>/redis` folder, or one holding only the data
 *   dir's lock (no embedded Redis ever ran there: a wrong PIXIU_DATA_DIR, or a node on
 *   PIXIU_REDIS_URL, which takes that lock too: src/redis/dir-lock.ts), a data dir whose
 *   store last ran on a shared Redis (its LAYOUT's `redisPrefix`), or the embedded
 *   redis-server could not be started (a node starting on the data dir holds its lock;
 *   redis-server missing; a damaged AOF), in local-server.ts's words
 */
export async function connectToWrite(config: Pick<Config, 'dataDir' | 'redisUrl' | 'redisCommandTimeoutMs'>): Promise<RedisToWrite> {
  const embedded = `the embedded Redis of ${config.dataDir}`;
  if (config.redisUrl !== undefined || await runningEmbedded(config.dataDir)) {
    const redis = await connectToRead(config);
    const close = (): Promise<void> => Promise.resolve(redis.disconnect());
    if (config.redisUrl !== undefined) return { redis, where: redactUrl(config.redisUrl), started: false, next: 'Now repoint or restart the nodes.', close };
    return { redis, where: embedded, started: false, next: RUNNING_EMBEDDED_NEXT, close };
  }
  await refuseNoEmbeddedData(config.dataDir);
  const [{ startLocalRedis }, { createRedis }, { pino }] = await Promise.all([
    import('../redis/local-server.js'), import('../redis/client.js'), import('pino'),
  ]);
  // The server's warnings (a left-over server adopted, its own WARNING lines) on stderr:
  // stdout is the command's one line.
  const logger = pino({ level: 'warn', base: undefined }, pino.destination({ fd: 2, sync: true }));
  const local = await startLocalRedis({ dataDir: config.dataDir, logger }).catch((err: Error) => {
    // Not "its node is stopped": a node starting on the data dir holds the lock (dir-lock.ts).
    throw new StartupError(`cannot start ${embedded} (no node serving on it): ${err.message}`, { cause: err });
  });
  let redis: Redis;
  try {
    redis = await createRedis({ url: local.url, commandTimeoutMs: config.redisCommandTimeoutMs, name: 'pixiu:cli' });
  } catch (err) {
    await local.stop();
    throw new StartupError((err as Error).message, { cause: err });
  }
  return {
    redis,
    where: `${embedded} (started for this command, the node being stopped, and stopped again)`,
    started: true,
    next: 'Now start the node.',
    close: async () => {
      redis.disconnect();
      await local.stop();
    },
  };
}

/**
 * The last words after writing to a redis-server found running on the data dir: a node
 * serving there reads what was written within 5 s; one left running by a node killed
 * outright (no node serves) is taken over by the node started next, which reads it then.
 */
export const RUNNING_EMBEDDED_NEXT = 'A node serving on this data dir reads it within 5 s; if none does (this redis-server was left running by a node killed outright), start the node: it takes this redis-server over.';

/**
 * Runs `work` on `target`'s Redis, then lets it go ({@link RedisToWrite.close}) whatever
 * happened. A failure of `work` is thrown as it is, even when the close fails too (that
 * one is told to `closeFailed`: a `finally` that awaited the close threw the close's
 * error instead, and the operator never saw why the command failed — a replica, a
 * prefix no service used). After `work` succeeded, a failed close is the command's
 * failure: a redis-server it started may not have written its AOF.
 * @param closeFailed told of a close that failed after `work` failed (default: a
 *   `pixiu: …` line on stderr)
 * @returns what `work` answered
 */
export async function withRedisToWrite<T>(target: RedisToWrite, work: (redis: Redis) => Promise<T>,
  closeFailed: (err: unknown) => void = (err) => process.stderr.write(`pixiu: closing ${target.where} failed too: ${err instanceof Error ? err.message : String(err)}\n`),
): Promise<T> {
  let done: T;
  try {
    done = await work(target.redis);
  } catch (err) {
    await target.close().catch(closeFailed);
    throw err;
  }
  await target.close();
  return done;
}

/**
 * True when an embedded redis-server runs on `dataDir`: its socket is there and its
 * pid file names a live process — a serving node's, or one a node killed outright left
 * running (its own process group outlives it). Redis removes both at a clean shutdown;
 * a redis-server killed outright leaves both, and its dead pid tells it.
 * @throws StartupError as {@link embeddedRedisSocket} (another user's private data dir)
 */
async function runningEmbedded(dataDir: string): Promise<boolean> {
  if (await embeddedRedisSocket(dataDir) === undefined) return false;
  let pid: number;
  try {
    pid = Number(readFileSync(path.join(dataDir, 'redis', 'redis.pid'), 'utf8').trim());
  } catch {
    // A socket without a pid file: taken for running, as before (connectToRead says if it is not).
    return true;
  }
  return !(Number.isSafeInteger(pid) && pid > 0) || isAlive(pid);
}

/**
 * Refuses a stopped data dir on which no embedded Redis has data: starting one there
 * would make an empty Redis, or one beside the shared Redis its store last ran on (its
 * LAYOUT's `redisPrefix`: then the command must run against that Redis).
 * @throws StartupError naming what to set instead
 */
async function refuseNoEmbeddedData(dataDir: string): Promise<void> {
  const dir = path.join(dataDir, 'redis');
  if (!existsSync(dir)) throw noEmbeddedData(dataDir, `no ${dir}`);
  const { readLayout } = await import('../store/layout.js');
  const recorded = (await readLayout(path.join(dataDir, 'xiu')))?.redisPrefix;
  // The data dir's lock (src/redis/dir-lock.ts) is there whatever Redis its node ran
  // with: alone and free, it is no embedded Redis's data. Held, a node is starting there:
  // the redis-server's start refuses it in its words. A folder that cannot be read is
  // left to that start too, as before.
  if (recorded === undefined && (await readdir(dir).catch(() => [])).join('/') === 'lock') {
    const { lockDataDirAt } = await import('../redis/dir-lock.js');
    const lock = await lockDataDirAt(dir, dataDir).catch(() => undefined);
    await lock?.close();
    if (lock !== undefined) throw noEmbeddedData(dataDir, `only the data dir's lock in ${dir}`);
  }
  if (recorded === undefined) return;
  // Not serve's refusal (src/cluster/prefix-guard.ts): its way out, deleting the LAYOUT's
  // redisPrefix, is for running the data dir on a Redis of its own; taken here it would
  // raise the generation on a Redis that holds none of its cluster's inboxes (walk23 L1).
  throw new StartupError(`the data dir ${dataDir} last ran on the Redis of PIXIU_REDIS_URL (key prefix "${recorded}"): its inboxes are there, `
    + 'not in the embedded Redis under it. Run the command against that Redis: '
    + `set PIXIU_REDIS_URL to it and PIXIU_REDIS_PREFIX to "${recorded}"`);
}

/** The refusal of {@link refuseNoEmbeddedData} for a data dir with no embedded Redis's data; `none` says what is there. */
function noEmbeddedData(dataDir: string, none: string): StartupError {
  return new StartupError(`no PIXIU_REDIS_URL, no embedded Redis running under ${dataDir}, and no embedded Redis data there (${none}): `
    + 'set PIXIU_DATA_DIR to the data dir of the node (its node may be stopped), or PIXIU_REDIS_URL to the Redis the nodes use');
}
