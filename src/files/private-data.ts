/**
 * What Pixiu keeps under the data dir is its user's alone (docs/decisions.md, "The data
 * dir is private to the service's user"): the embedded Redis's AOF holds the cluster
 * secret in clear (`px:cluster:secret`, which opens the node-to-node read of any
 * message), the store's LevelDB files under `xiu/` hold message bodies. A security
 * tester read both as user `nobody` when they were 0644 in 0755 folders (umask 022).
 *
 * Two layers: the folders Pixiu makes are made {@link PRIVATE_DIR_MODE}, which keeps
 * other users out whatever the modes of the files in them; and `pixiu serve` runs with
 * {@link PRIVATE_UMASK} ({@link keepCreatedFilesPrivate}), so that what the native
 * code makes (LevelDB's partition folders and files, in this process; the embedded
 * redis-server's AOF folder, files and pid file, in a child that inherits the umask)
 * is 0700 / 0600 too. Folders that exist already (an older release made them 0755, or
 * an operator) are left as they are: {@link foldersOpenToOthers} finds the ones other
 * users can reach, for a warn line at start.
 */
import { statSync } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { StartupError } from '../errors.js';
import { makeDir, unenterableFolder } from './make-dir.js';

/** Mode of the folders Pixiu makes under the data dir (and the data dir, when it makes it). */
export const PRIVATE_DIR_MODE = 0o700;

/** Permission bits `pixiu serve` keeps out of whatever it (and its redis-server) creates: group's and others'. */
export const PRIVATE_UMASK = 0o077;

/** The folders directly under the data dir that Pixiu keeps data in. */
const DATA_FOLDERS = ['redis', 'xiu', 'secrets'] as const;

/** Others' permission bits (read, write, search). */
const OTHERS = 0o007;
/** Others' search (execute) bit on a folder: without it they cannot reach what is in it. */
const OTHERS_SEARCH = 0o001;

/**
 * Adds {@link PRIVATE_UMASK} to the process's umask (an umask already stricter keeps
 * its other bits): from now on files this process creates are not readable by group
 * or others, and folders not reachable by them; a child process (the embedded
 * redis-server) inherits it. For `pixiu serve` only, before it creates anything: the
 * umask is the whole process's (and cannot be set in a worker thread).
 */
export function keepCreatedFilesPrivate(): void {
  process.umask(process.umask(PRIVATE_UMASK) | PRIVATE_UMASK);
}

/**
 * The data folders under `dataDir` (`redis/`, `xiu/`, `secrets/`, those that exist)
 * that other users of the machine can reach: the folder has a permission bit for
 * others, and others can search every folder on the way to it (the data dir and each
 * folder above it, symbolic links resolved). A data dir others cannot enter (mode 0700,
 * or under such a folder) hides all of them; group bits are not counted (a group is
 * the operator's choice). Answers none when the data dir does not exist yet.
 * @returns absolute paths, in the order `redis`, `xiu`, `secrets`
 */
export async function foldersOpenToOthers(dataDir: string): Promise<string[]> {
  const real = await realpath(dataDir).catch(() => undefined);
  if (real === undefined || !await othersCanSearchDownTo(real)) return [];
  const open: string[] = [];
  for (const name of DATA_FOLDERS) {
    const folder = path.join(real, name);
    const info = await stat(folder).catch(() => undefined);
    if (info !== undefined && info.isDirectory() && (info.mode & OTHERS) !== 0) open.push(folder);
  }
  return open;
}

/**
 * The warn line of {@link rootOnOthersDataDir}: a start as root on a data dir another
 * user owns (walk38 F7: what it then made — LevelDB's files, the embedded Redis's lock —
 * was root's, and the owner's next start failed on a LevelDB lock error).
 */
export const ROOT_ON_OTHERS_DATA_DIR_LOG = 'pixiu runs as root on a data dir another user owns: what this start creates there is root\'s, '
  + 'and that user\'s next start will fail on it; stop it and run as the owner (sudo -u \'#<owner>\' …), then chown -R the data dir back if it was started already (README, "Running in production")';

/**
 * The owner of `dataDir` when this process runs as root and the data dir exists and is
 * another user's; undefined otherwise (not root, no data dir yet, root's own, or not
 * POSIX).
 */
export async function rootOnOthersDataDir(dataDir: string): Promise<number | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const owner = (await stat(dataDir).catch(() => undefined))?.uid;
  return owner === undefined || owner === 0 ? undefined : owner;
}

/** Whether others may search `dir` (absolute, real) and every folder above it. */
async function othersCanSearchDownTo(dir: string): Promise<boolean> {
  for (let at = dir; ; at = path.dirname(at)) {
    const info = await stat(at).catch(() => undefined);
    if (info === undefined || (info.mode & OTHERS_SEARCH) === 0) return false;
    if (path.dirname(at) === at) return true;
  }
}

/**
 * Why this user cannot use what the data dir holds (the embedded Redis's socket, a kept
 * secret), and what to do: run the command as the owner of `locked` (the folder it may
 * not search, or the file itself), the service's user. Used by `pixiu inspect`
 * (src/cli/inspect-redis.ts) and by the client commands' read of a kept secret
 * (src/auth/secrets.ts; walk38 F8: `pixiu token` said only EACCES).
 * @param what `locked` as the message names it
 * @returns the sentence, with the owner's uid when `locked` can be stat'd
 */
export function notOurs(what: string, locked: string): string {
  let uid: number | undefined;
  try {
    uid = statSync(locked).uid;
  } catch {
    // Not even that: the advice stands without the uid.
  }
  const me = process.getuid?.();
  return `${what} is private to the service's user${uid === undefined ? '' : ` (uid ${uid}, its owner)`}`
    + `${me === undefined ? '' : `, not this one (uid ${me})`}: run this command as that user `
    + `(e.g. sudo -u ${uid === undefined ? '<that user>' : `'#${uid}'`} pixiu …)`;
}

/**
 * Makes `dir` (and the folders above it) private ({@link PRIVATE_DIR_MODE}) unless it
 * exists: the data dir's `secrets/` (src/auth/secrets.ts) and `redis/` (the data dir's
 * lock, src/redis/dir-lock.ts).
 * @throws StartupError in make-dir.ts's words (the folder that blocks, its owner and mode)
 */
export async function makePrivateDir(dir: string): Promise<void> {
  try {
    await makeDir(dir, PRIVATE_DIR_MODE);
  } catch (err) {
    throw new StartupError((err as Error).message, { cause: err });
  }
}

/**
 * For a permission error (EACCES, EPERM) at `target`, whose data it is and what to do
 * ({@link notOurs}): the folder above `target` this user may not enter, else `fallback`
 * (the file itself, or the socket's folder). Undefined for any other error.
 */
export async function deniedAdvice(target: string, err: unknown, fallback = target): Promise<string | undefined> {
  const code = (err as NodeJS.ErrnoException).code;
  if (code !== 'EACCES' && code !== 'EPERM') return undefined;
  const locked = (await unenterableFolder(target))?.folder ?? fallback;
  return notOurs(locked, locked);
}
