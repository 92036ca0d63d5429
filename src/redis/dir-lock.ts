/**
 * The data dir's lock (docs/decisions.md, "Embedded Redis"): a LevelDB at
 * `<dataDir>/redis/lock`, whose LOCK the OS holds for the process until it is closed or
 * the process ends (SIGKILL too). Every `pixiu serve` takes it before it starts or
 * reaches any Redis, with the embedded Redis and with `PIXIU_REDIS_URL` alike, and holds
 * it until it stops: of two starts on one data dir, the second stops here, before it
 * claims the data dir's partitions on a Redis or records in its LAYOUT where it runs (a
 * start with `PIXIU_REDIS_URL` on a data dir an embedded-Redis node served did both
 * before it failed on the store's partition 0: walk38 F1). It was first the embedded
 * Redis's alone — two starts at once would both find no redis-server (or one with no
 * client yet) and run two on one AOF and one socket — hence its place under `redis/`,
 * kept so that a node of an earlier release (which takes it with the embedded Redis
 * only) and one of this release still exclude each other.
 */
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { StartupError } from '../errors.js';
import { makePrivateDir } from '../files/private-data.js';

/** A lock held; closing it lets another process take it. */
export interface DirLock {
  close(): Promise<void>;
}

/**
 * Takes the data dir's lock at `<dir>/lock` (`dir` is `<dataDir>/redis`, which exists;
 * {@link lockDataDir} makes it first). The lock is the whole data dir's, taken by every
 * start before any Redis (docs/decisions.md, "Embedded Redis"); it lives under `redis/`
 * so that an earlier release, whose embedded Redis took it there, is excluded too.
 * @throws StartupError when another process (or this one) holds it, or it cannot be opened
 */
export async function lockDataDirAt(dir: string, dataDir: string): Promise<DirLock> {
  const location = path.join(dir, 'lock');
  const db = new ClassicLevel(location);
  try {
    await db.open();
  } catch (err) {
    const code = (err as { cause?: { code?: unknown } }).cause?.code;
    if (code === 'LEVEL_LOCKED') {
      throw new StartupError(`data dir ${dataDir} is in use: another pixiu is starting or running on it (${location} is locked); `
        + 'stop that one first, or give this one another PIXIU_DATA_DIR', { cause: err });
    }
    const why = String((err as { cause?: { message?: unknown } }).cause?.message ?? (err as Error).message);
    throw new StartupError(`cannot open ${location}: ${why}${/permission denied/i.test(why) ? await othersFiles(location, dataDir) : ''}`, { cause: err });
  }
  return { close: () => db.close() };
}

/**
 * For a lock this user may not open: whose its files are, when another user's, and what
 * to do (walk39 F2: after a start as root, the service user's next start said only
 * LevelDB's `IO error: …/CURRENT: Permission denied`). Empty when they are this
 * user's, or cannot be stat'd (the error stands alone).
 */
async function othersFiles(location: string, dataDir: string): Promise<string> {
  const me = process.getuid?.();
  const group = process.getgid?.();
  const paths = [path.dirname(location), location, path.join(location, 'CURRENT'), path.join(location, 'LOCK')];
  const owners = await Promise.all(paths.map((at) => stat(at).then((info) => info.uid, () => undefined)));
  const other = owners.find((uid) => uid !== undefined && uid !== me);
  if (other === undefined || me === undefined) return '';
  return ` (it holds files of uid ${other}, not of this user, uid ${me}: a start as another user, root?; `
    + `give the data dir back to this user: chown -R ${me}${group === undefined ? '' : `:${group}`} ${dataDir})`;
}

/**
 * Takes `dataDir`'s lock ({@link lockDataDirAt}), making `<dataDir>/redis` first (private:
 * src/files/private-data.ts) when it is missing.
 * @throws StartupError when the folder cannot be made (src/files/make-dir.ts's words), or as {@link lockDataDirAt}
 */
export async function lockDataDir(dataDir: string): Promise<DirLock> {
  const dir = path.join(dataDir, 'redis');
  await makePrivateDir(dir);
  return lockDataDirAt(dir, dataDir);
}
