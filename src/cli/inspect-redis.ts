/**
 * The Redis an `inspect` command reads (`inspect inbox`, `inspect cluster`): the
 * configured `PIXIU_REDIS_URL`, or the embedded one of the data dir while a `pixiu
 * serve` runs on it — inspect never starts one. Every failure is a {@link StartupError}:
 * one line on stderr, exit 1, nothing on stdout (src/cli/main.ts; README "Commands").
 */
import { statSync } from 'node:fs';
import path from 'node:path';
import type { Redis } from 'ioredis';
import type { Config } from '../config/config.js';
import { StartupError } from '../errors.js';
import { deniedAdvice, notOurs } from '../files/private-data.js';
import { refusalOf } from '../redis/command-refusal.js';
import { Keys } from '../redis/keys.js';
import { redactUrl, unixUrl } from '../redis/url.js';

/** The settings every Redis-reading inspect command takes. */
export const READ_KEYS = ['dataDir', 'redisUrl', 'redisPrefix', 'redisCommandTimeoutMs'] as const;

/** The `--redis-url` help of a command that needs a Redis to read. */
export const READ_URL_DOC = 'Redis to read, redis://, rediss:// or unix:// URL; unset: the embedded Redis of a `pixiu serve` running on the data dir';

/**
 * Connects to the Redis to read: `config.redisUrl`, else the embedded Redis of a serve
 * running on `config.dataDir`. Loads ioredis only now (help and refused options start
 * without it).
 * @throws StartupError when there is none (no URL, no embedded Redis running), it
 *   cannot be reached (the reason Redis or the socket gave: `cannot reach Redis at …`),
 *   this user may not reach the embedded one ({@link embeddedRedisSocket}), or it runs
 *   in cluster mode, which Pixiu does not support (version-check.ts `refuseClusterMode`)
 */
export async function connectToRead(config: Pick<Config, 'dataDir' | 'redisUrl' | 'redisCommandTimeoutMs'>): Promise<Redis> {
  let url = config.redisUrl;
  let sock: string | undefined;
  if (url === undefined) {
    sock = await embeddedRedisSocket(config.dataDir);
    if (sock === undefined) {
      throw new StartupError(`no PIXIU_REDIS_URL and no embedded Redis running under ${config.dataDir}: `
        + 'set PIXIU_REDIS_URL to the Redis the service uses (a serve given PIXIU_REDIS_URL runs none of its own), '
        + 'or start `pixiu serve` on this data dir without it');
    }
    url = unixUrl(sock);
  }
  const [{ createRedis }, { refuseClusterMode }] = await Promise.all([import('../redis/client.js'), import('../redis/version-check.js')]);
  const redis = await createRedis({ url, commandTimeoutMs: config.redisCommandTimeoutMs, name: 'pixiu:inspect' })
    .catch((err: Error) => {
      // The socket itself is the service user's (unixsocketperm 700): found, but not
      // ours to connect to (a socket path too long for the data dir lives in the temp
      // folder; a data dir made before its folders were private).
      const denied = /EACCES|EPERM/.test(err.message);
      throw new StartupError(denied && sock !== undefined ? `${err.message}: ${notOurs('the embedded Redis\'s socket', sock)}` : err.message, { cause: err });
    });
  // Refused as serve refuses it (docs/decisions.md "Redis Cluster").
  await refuseClusterMode(redis, redactUrl(url)).catch((err: unknown) => {
    redis.disconnect();
    throw err;
  });
  return redis;
}

/**
 * The socket path of the embedded Redis of a `pixiu serve` running on `dataDir` (the
 * socket is there); undefined when none runs. Since the data dir's folders are
 * private to the service's user (0700, docs/decisions.md "The data dir is private to
 * the service's user"), another user cannot even see whether the socket is there:
 * that is said, not taken for "none running".
 *
 * A socket in the temp dir (a data dir path too long for `<dataDir>/redis/redis.sock`)
 * is looked for in the folder of the data dir's owner, the service's user (so that root
 * finds it too: walk39 F1), and used only when that folder is that user's alone, checked
 * as `pixiu serve` checks it before it starts Redis there (socket-dir.ts): another local
 * user can compute the folder's name and make it first, with a Redis of theirs listening
 * at the socket's path (reread F2). No folder there: none runs; it is not made.
 * @throws StartupError when this user may not look for the socket (EACCES on a folder
 *   above it), naming the folder's owner (uid) as the user to run the command as; when
 *   the socket's folder in the temp dir is not the data dir owner's alone, in serve's one line
 */
export async function embeddedRedisSocket(dataDir: string): Promise<string | undefined> {
  const [{ localRedisSocket }, { checkSocketDirIfThere }] = await Promise.all([import('../redis/local-server.js'), import('../redis/socket-dir.js')]);
  // The service's folder is its user's, the data dir's owner: run as root (or another
  // user), this command looks there, not in its own (walk39 F1).
  const owner = dataDirOwner(dataDir);
  const sock = localRedisSocket(dataDir, owner);
  if (path.dirname(sock) !== path.join(dataDir, 'redis') && !await checkSocketDirIfThere(path.dirname(sock), dataDir, owner)) return undefined;
  try {
    statSync(sock);
  } catch (err) {
    const denied = await deniedAdvice(sock, err, path.dirname(sock));
    if (denied === undefined) return undefined;
    throw new StartupError(`cannot look for the embedded Redis's socket ${sock} (${String((err as NodeJS.ErrnoException).code)}): ${denied}`, { cause: err });
  }
  return sock;
}

/** The data dir's owner (uid); undefined when it cannot be stat'd (then this user's folder is looked in). */
function dataDirOwner(dataDir: string): number | undefined {
  try {
    return statSync(dataDir).uid;
  } catch {
    return undefined;
  }
}

/**
 * Refuses a key prefix no Pixiu service has used on this Redis (a wrong
 * `PIXIU_REDIS_PREFIX`), which reads as empty: every service writes
 * `<prefix>cluster:secret` at start. Call it only when what was read is empty, so a
 * script can tell "nothing there" from "wrong prefix". A replica whose link to its
 * primary is down (still in its first sync, or cut off) may hold none of the
 * primary's keys yet: that is said instead (INFO replication), the prefix being
 * likely right (an SRE's finding: the prefix message sent them the wrong way).
 * @throws StartupError naming the prefix, or the replica's primary, or INFO's refusal
 *   (then neither can be told)
 */
export async function checkPrefixUsed(redis: Redis, prefix: string): Promise<void> {
  if ((await redis.exists(new Keys(prefix).clusterSecret())) !== 0) return;
  const replication = await redis.info('replication').catch((err: unknown) => err as Error);
  // Refused (an ACL user without +info): the replica check cannot be made, and the
  // prefix line would send the operator the wrong way on a replica (walk29 F7).
  let info = '';
  if (typeof replication === 'string') info = replication;
  else {
    const refused = refusalOf(replication.message);
    if (refused !== undefined) throw new StartupError(`no Pixiu cluster secret under the key prefix ${JSON.stringify(prefix)}, and whether this Redis is a replica not synced yet cannot be told: ${refused.words}`);
  }
  const syncing = replicaNotSynced(info);
  if (syncing !== undefined) throw new StartupError(syncing);
  throw new StartupError(`no Pixiu service has used the key prefix ${JSON.stringify(prefix)} on this Redis `
    + '(no cluster secret under it): is PIXIU_REDIS_PREFIX / --redis-prefix the service\'s? (default "px:")');
}

/**
 * From Redis's `INFO replication` text: when it is a replica whose link to its primary
 * is not up, why it may hold none of the primary's keys, in words; else undefined.
 */
export function replicaNotSynced(info: string): string | undefined {
  const field = (name: string): string | undefined => new RegExp(`^${name}:(.*?)\r?$`, 'm').exec(info)?.[1];
  if (field('role') !== 'slave' || field('master_link_status') === 'up') return undefined;
  const primary = `${field('master_host') ?? '?'}:${field('master_port') ?? '?'}`;
  if (field('master_sync_in_progress') === '1') {
    return `this Redis is a replica still syncing from its primary ${primary} (master_sync_in_progress:1): `
      + 'it holds none of the primary\'s keys until the sync ends; wait, or read the primary (--redis-url)';
  }
  return `this Redis is a replica whose link to its primary ${primary} is down (master_link_status:down: `
    + 'not synced yet, or cut off): it may hold none of the primary\'s keys; read the primary (--redis-url), '
    + 'or wait until INFO replication says master_link_status:up';
}
