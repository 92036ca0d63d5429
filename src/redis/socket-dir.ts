/**
 * Where the embedded Redis's socket goes when `<dataDir>/redis/redis.sock` is longer than
 * a unix socket path may be (a data dir path over ~90 characters): a folder of the
 * service's user's own in the temp dir, `<temp dir>/pixiu-<uid>/`, made 0700 and checked
 * to be that before anything uses it (docs/decisions.md, "Embedded Redis").
 *
 * Before, the socket was `/tmp/pixiu-redis-<hash>.sock` itself: a name any local user
 * could compute from the data dir's path and take first in the world-writable, sticky
 * /tmp, which the service's user then cannot remove, so redis-server's bind failed
 * ("Address already in use") and pixiu could not start; and while the embedded Redis
 * was down (between an exit and its restart) another user could bind the path and be
 * the Redis pixiu reconnects to, answering it the cluster secret (secaudit F5).
 */
import type { Stats } from 'node:fs';
import { lstat, mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { StartupError } from '../errors.js';
import { PRIVATE_DIR_MODE, PRIVATE_UMASK } from '../files/private-data.js';


/**
 * The private folder for the embedded Redis's socket: `<os.tmpdir()>/pixiu-<uid>` (the
 * user name where the system has no uids). One per user, the same across restarts, so
 * a restarted pixiu finds a redis-server left running by its socket's path
 * (left-server.ts).
 * @param owner the uid whose folder it is: this process's (serve), or the data dir's
 *   owner (the commands that look for the service's Redis, run as root say: walk39 F1)
 */
export function privateSocketDir(owner: number | undefined = process.getuid?.()): string {
  return path.join(os.tmpdir(), `pixiu-${owner ?? os.userInfo().username}`);
}

/**
 * Makes {@link privateSocketDir}'s `dir` (mode 0700) unless it exists, then checks that
 * it is this user's alone ({@link checkSocketDirIfThere}). Another user who made it first
 * could otherwise hold or replace the socket in it.
 * @param dataDir the data dir, named in the refusal (its path is what made it needed)
 * @throws StartupError one line naming the folder, what is wrong with it and what to do,
 *   when it is not such a folder or cannot be made or looked at (gone again at once, say)
 */
export async function checkPrivateSocketDir(dir: string, dataDir: string): Promise<void> {
  try {
    await mkdir(dir, { mode: PRIVATE_DIR_MODE });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
      throw new StartupError(`cannot create ${dir} (${whyThere(dataDir)}): ${(err as Error).message}`, { cause: err });
    }
  }
  if (!await checkSocketDirIfThere(dir, dataDir)) {
    throw new StartupError(`cannot look at ${dir} (${whyThere(dataDir)}): it was removed as soon as it was made`);
  }
}

/**
 * Checks, without making it, that the socket's folder `dir` is `owner`'s alone: a
 * folder (`lstat`: not a symbolic link), owned by `owner` (this process's uid unless
 * given), with no permission for group or others. For a command that only reads (`pixiu inspect`, `pixiu redis
 * lost-writes`, src/cli/inspect-redis.ts) before it connects to a socket there, and for
 * {@link checkPrivateSocketDir}.
 *
 * Only the folder is checked, when this is called: a client's reconnect to the socket
 * later (ioredis's own) is not. The folder being this user's and the temp dir sticky,
 * only this user or root can remove or replace it meanwhile.
 * @param dataDir the data dir, named in the refusal (its path is what made it needed)
 * @returns false when there is no such folder (ENOENT: no socket can be in it), true
 *   when there is and it is this user's alone
 * @throws StartupError one line naming the folder, what is wrong with it and what to do;
 *   or, when it cannot be looked at (EACCES on the temp dir, say), that and why
 */
export async function checkSocketDirIfThere(dir: string, dataDir: string, owner: number | undefined = process.getuid?.()): Promise<boolean> {
  let info: Stats;
  try {
    info = await lstat(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw new StartupError(`cannot look at ${dir} (${whyThere(dataDir)}): ${(err as Error).message}`, { cause: err });
  }
  const whose = owner === process.getuid?.() ? 'this user' : 'the data dir\'s owner';
  const problem = info.isSymbolicLink() ? 'is a symbolic link, not a folder'
    : !info.isDirectory() ? 'is not a folder'
      : owner !== undefined && info.uid !== owner ? `is owned by uid ${info.uid}, not by ${whose} (uid ${owner})`
        : owner !== undefined && (info.mode & PRIVATE_UMASK) !== 0 ? `has mode ${(info.mode & 0o7777).toString(8).padStart(4, '0')}, not 0700 (group or others may use it)`
          : undefined;
  if (problem === undefined) return true;
  throw new StartupError(`${dir} ${problem}, so pixiu does not put its Redis socket there (${whyThere(dataDir)}): another user could hold or take over the socket. `
    + `Remove ${dir} (it is made again, 0700) after checking who made it, or give PIXIU_DATA_DIR a shorter path`);
}

/** Why the socket's folder is in the temp dir at all, for the refusals. */
function whyThere(dataDir: string): string {
  return `the embedded Redis's socket goes there because ${path.join(dataDir, 'redis', 'redis.sock')} is longer than a unix socket path may be`;
}
