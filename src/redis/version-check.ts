/**
 * The oldest Redis Pixiu runs on. Its scripts and calls use commands of Redis 7.0:
 * `SET … NX GET` (client_msg_id and partition claims, src/cluster) and `PEXPIRETIME`
 * (inbox retention, src/inbox). On an older Redis they fail as soon as they are used,
 * with a syntax error a user cannot place — while the start, `/readyz` and most routes
 * looked fine. Ubuntu 22.04's `apt-get install redis-server` is Redis 6.0, so the
 * start checks `INFO server` and refuses, naming both versions.
 *
 * The same reply says whether the Redis runs in cluster mode (`redis_mode:cluster`),
 * which Pixiu does not support (docs/decisions.md "Redis Cluster"): a start there
 * failed after 0.5 s with "Redis is unavailable, retry later" (a MOVED reply) or
 * "Redis Cluster is down; retry later" (no slots served), and retrying never helped
 * (walk28 F4). It is refused, naming the URL and what to run instead.
 */
import type { Redis } from 'ioredis';
import { StartupError } from '../errors.js';
import { refusalOf } from './command-refusal.js';

/** The oldest Redis version Pixiu runs on, `[major, minor]`. */
export const MIN_REDIS_VERSION: readonly [number, number] = [7, 0];

/**
 * What is wrong with the Redis whose `INFO server` text is `info`, or undefined when
 * it is new enough. A text without `redis_version` (a proxy or a fork that leaves it
 * out) is not second-guessed: undefined.
 */
export function redisVersionProblem(info: string): string | undefined {
  const version = /^redis_version:(\d+)\.(\d+)\S*\s*$/m.exec(info);
  if (version === null) return undefined;
  const [major, minor] = [Number(version[1]), Number(version[2])];
  const [minMajor, minMinor] = MIN_REDIS_VERSION;
  if (major > minMajor || (major === minMajor && minor >= minMinor)) return undefined;
  const found = /^redis_version:(\S+)/m.exec(info)?.[1] ?? `${major}.${minor}`;
  return `Pixiu needs Redis ${minMajor}.${minMinor} or later (it uses SET … NX GET and PEXPIRETIME); this one is ${found}`;
}

/**
 * What is wrong with a Redis whose `INFO server` text `info` says it runs in cluster
 * mode (`redis_mode:cluster`, set by `cluster-enabled yes` whether or not it serves
 * slots), or undefined for any other mode or a text without `redis_mode`. Pixiu
 * talks to one Redis with a client that does not follow a cluster's redirections
 * (MOVED, ASK), so one Redis primary must hold every key; a one-node cluster serving
 * every slot would run only by chance, untested (DESIGN.md §9 names Cluster as the
 * scale-out path; docs/decisions.md "Redis Cluster" says it is not built).
 */
export function redisModeProblem(info: string): string | undefined {
  if (!/^redis_mode:cluster\s*$/m.test(info)) return undefined;
  return 'this Redis runs in cluster mode (redis_mode:cluster), which Pixiu does not support: '
    + 'it needs one Redis primary holding every key (replicas and a failover that moves the primary are fine: README "Redis failover"); '
    + 'point PIXIU_REDIS_URL at a standalone Redis (cluster-enabled no), or leave it unset for the embedded one';
}

/**
 * Refuses to start on a Redis older than {@link MIN_REDIS_VERSION} or in cluster mode
 * ({@link redisModeProblem}), and on one that
 * refuses `INFO` for good (an ACL user without `+info`, INFO renamed away): every
 * start needs it (this version, and Redis's uptime: src/cluster/block-claim.ts), so
 * every node is refused alike, where only the first node of a cluster read the uptime
 * and failed on it (redisrest F3). Any other error reply (a proxy's, LOADING) is not
 * second-guessed, as a refused `CONFIG` is not (settings-check.ts).
 * @param shownUrl the Redis URL as logged (password removed)
 * @throws StartupError naming the URL, the version needed and the version found; naming
 *   the URL and saying Redis Cluster is not supported (final: retrying never helps); naming
 *   the URL, the refusal and what to grant (`cannot use Redis at <url>: …`, as client.ts
 *   words a refusal of its ready check; command-refusal.ts `refusalOf`); or, when Redis does
 *   not answer `INFO` (down, timed out), naming the URL and why
 */
export async function requireRedisVersion(redis: Redis, shownUrl: string): Promise<void> {
  let info: string;
  try {
    info = await redis.info('server');
  } catch (err) {
    const refusal = refusalOf((err as Error).message);
    if (refusal !== undefined) throw new StartupError(`cannot use Redis at ${shownUrl}: ${refusal.words}`, { cause: err });
    if ((err as Error).name === 'ReplyError') return;
    throw new StartupError(`cannot read INFO server of Redis at ${shownUrl}: ${(err as Error).message}`, { cause: err });
  }
  const problem = redisVersionProblem(info);
  if (problem !== undefined) throw new StartupError(`${problem}, at ${shownUrl}`);
  refuseMode(info, shownUrl);
}

/**
 * Refuses a Redis in cluster mode for the ops commands (`pixiu inspect …`, `pixiu redis
 * lost-writes`: src/cli), in the words serve's start uses ({@link requireRedisVersion}):
 * on a one-node cluster serving no slots they said "Redis Cluster is down; retry later"
 * (retrying never helps), and on one serving every slot they read and wrote it, by chance.
 * The version is not checked: reading and raising the generation need nothing of 7.0.
 * An `INFO server` that fails (refused to an ACL user without `+info`, timed out) tells
 * nothing: the command goes on, and its own reads say what Redis answers.
 * @param shownUrl the Redis URL as shown (password removed)
 * @throws StartupError `Redis at <url>: this Redis runs in cluster mode (redis_mode:cluster), which Pixiu does not support: …`
 */
export async function refuseClusterMode(redis: Redis, shownUrl: string): Promise<void> {
  const info = await redis.info('server').catch(() => '');
  refuseMode(info, shownUrl);
}

/**
 * Throws when `info` (an `INFO server` reply) is of a Redis in a mode Pixiu does not
 * support ({@link redisModeProblem}), in one wording for serve's start and the ops commands.
 * @throws StartupError `Redis at <url>: <the problem>`
 */
function refuseMode(info: string, shownUrl: string): void {
  const mode = redisModeProblem(info);
  if (mode !== undefined) throw new StartupError(`Redis at ${shownUrl}: ${mode}`);
}
