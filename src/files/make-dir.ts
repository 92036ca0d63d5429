/**
 * Creating the data directory's folders, and reading files in it, with an error that
 * names the real cause. Node's recursive `mkdir` reports the first failure it met:
 * ENOENT when a parent could not be made (a data dir on a read-only file system read as
 * "no such file or directory"), ENOTDIR when a file stands in the path, without saying
 * which (fresh-user findings). Here such a failure is explained by the deepest path
 * that exists: a file, or a folder that is not writable (EROFS, EACCES, …).
 */
import { access, constants, lstat, mkdir, readlink, stat } from 'node:fs/promises';
import path from 'node:path';

/** The errors a missing or blocked ancestor gives, which {@link pathProblem} explains. */
const ANCESTOR_CODES: ReadonlySet<string | undefined> = new Set(['ENOENT', 'ENOTDIR']);

/**
 * `mkdir -p dir` (with `mode` for the folders it creates), one level at a time from
 * the root. Node's recursive `mkdir` (20.x) never ends where making a folder fails
 * with ENOENT although its parent exists — anywhere under `/proc`: it makes the
 * parent again, and again, on a pool thread (`PIXIU_DATA_DIR=/proc/x` hung the start
 * without a word; a fresh tester's finding).
 * @throws Error `cannot create <dir>: <why>`, where `why` names the deepest existing
 *   path that stops it (`/x is a file, not a directory`, `/x is not writable: EROFS: …`)
 *   or is the original error's message; `cause` is the original error
 */
export async function makeDir(dir: string, mode?: number): Promise<void> {
  try {
    await makeEachLevel(path.resolve(dir), mode);
  } catch (err) {
    throw new Error(`cannot create ${dir}: ${await explained(dir, err)}`, { cause: err });
  }
}

/** The folders of absolute path `dir` from the one under the root down to `dir` itself. */
function levelsOf(dir: string): string[] {
  const levels: string[] = [];
  for (let at = dir; path.dirname(at) !== at; at = path.dirname(at)) levels.unshift(at);
  return levels;
}

/**
 * Makes `dir` and each missing folder above it, top down.
 * @throws the first failure's error (EEXIST where a file stands at `dir` itself;
 *   ENOTDIR where one stands above it)
 */
async function makeEachLevel(dir: string, mode: number | undefined): Promise<void> {
  for (const level of levelsOf(dir)) {
    try {
      await mkdir(level, mode === undefined ? {} : { mode });
    } catch (err) {
      if (ANCESTOR_CODES.has((err as NodeJS.ErrnoException).code)) throw err;
      // A folder there already is fine, whatever mkdir said of it (Linux says EEXIST;
      // other systems may say EROFS or EACCES first, as Node's own recursive mkdir
      // allows for). A file at `dir` is its caller's EEXIST (explained); one above it
      // fails the next level with ENOTDIR.
      const info = await stat(level).catch(() => undefined);
      if (info === undefined || (level === dir && !info.isDirectory())) throw err;
    }
  }
}

/**
 * What `err`, met at `target`, comes from: for EEXIST, `target` itself being a file, or
 * a symbolic link on the way to it that points nowhere; for EACCES, a folder above
 * `target` this user may not enter, else the deepest existing folder above it when this
 * user may not write there (walk38 F4: a folder to be made in it was named as one that
 * "cannot be entered"); for ENOENT or ENOTDIR, the deepest existing path above `target`
 * that is a file or is not writable, when there is one; else the error's own message.
 */
export async function explained(target: string, err: unknown): Promise<string> {
  const own = err instanceof Error ? err.message : String(err);
  // `mkdir -p` of a path a file holds: EEXIST, as if it were done; mkdir of a link
  // whose target is missing: EEXIST too, though nothing is there to use.
  if ((err as NodeJS.ErrnoException | undefined)?.code === 'EEXIST') {
    const info = await stat(target).catch(() => undefined);
    if (info !== undefined) return info.isDirectory() ? own : `${path.resolve(target)} is a file, not a directory`;
    return (await danglingLink(target)) ?? own;
  }
  if ((err as NodeJS.ErrnoException | undefined)?.code === 'EACCES') return (await unsearchable(target)) ?? (await pathProblem(target)) ?? own;
  if (!ANCESTOR_CODES.has((err as NodeJS.ErrnoException | undefined)?.code)) return own;
  return (await pathProblem(target)) ?? own;
}

/** A folder this user may not enter, found by {@link unenterableFolder}. */
export interface UnenterableFolder {
  /** The folder, as reached (links on the way resolved). */
  readonly folder: string;
  /** Its owner and mode; undefined when it cannot be stat'd either. */
  readonly uid?: number;
  readonly mode?: number;
  /** The first symbolic link on the way to it, if any. */
  readonly via?: string;
}

/**
 * The highest folder above `target` that this user may not enter (search, the `x`
 * bit), with its owner and mode: what an EACCES at `target` comes from, when the error
 * itself names only `target`. Symbolic links on the way are followed (at most 40), so
 * the folder found is the one that blocks, not a link into it (review4 F1). Undefined
 * when every folder above it may be entered (the cause is `target` itself). Also
 * src/cli/inspect-redis.ts's, for the embedded Redis's socket.
 */
export async function unenterableFolder(target: string): Promise<UnenterableFolder | undefined> {
  let rest = path.dirname(path.resolve(target)).split(path.sep).filter((part) => part !== '');
  let at = path.parse(path.resolve(target)).root;
  let via: string | undefined;
  for (let links = 0; ;) {
    try {
      await access(at, constants.X_OK);
    } catch (err) {
      // A folder not there yet blocks nothing: making it is what failed ({@link pathProblem}).
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      const info = await stat(at).catch(() => undefined);
      return { folder: at, uid: info?.uid, mode: info === undefined ? undefined : info.mode & 0o7777, via };
    }
    const name = rest.shift();
    if (name === undefined) return undefined;
    const next = path.join(at, name);
    const link = (await lstat(next).catch(() => undefined))?.isSymbolicLink() === true && links++ < 40
      ? await readlink(next).catch(() => undefined) : undefined;
    if (link === undefined) {
      at = next;
      continue;
    }
    via ??= next;
    const resolved = path.resolve(at, link);
    rest = [...resolved.split(path.sep).filter((part) => part !== ''), ...rest];
    at = path.parse(resolved).root;
  }
}

/**
 * For EACCES at `target`: the folder above it this user may not enter
 * ({@link unenterableFolder}), with its owner and mode, and what to do (an ops finding:
 * a data dir under a 0700 folder of another user read as "cannot read the store layout
 * … EACCES"); the first link on the way is named too. Undefined when every folder
 * above it may be entered (the error names the cause).
 */
async function unsearchable(target: string): Promise<string | undefined> {
  const found = await unenterableFolder(target);
  if (found === undefined) return undefined;
  const { folder, uid, mode, via } = found;
  const me = process.getuid?.();
  const whose = uid === undefined ? '' : ` (owner uid ${uid}, mode ${(mode ?? 0).toString(8).padStart(4, '0')})`;
  return `permission denied (EACCES): ${folder}${whose}${via === undefined ? '' : `, reached through the link ${via},`} cannot be entered by this user${me === undefined ? '' : ` (uid ${me})`}: `
    + `run as a user who may, or let this one in (chmod / chown of ${folder})`;
}

/** What keeps `target` from being made, found at its deepest existing ancestor; undefined: nothing found. */
async function pathProblem(target: string): Promise<string | undefined> {
  let at = path.resolve(target);
  for (;;) {
    const parent = path.dirname(at);
    if (parent === at) return undefined;
    at = parent;
    const info = await stat(at).catch(() => undefined);
    if (info === undefined) continue;
    if (!info.isDirectory()) return `${at} is a file, not a directory`;
    try {
      await access(at, constants.W_OK);
      return undefined;
    } catch (err) {
      const me = process.getuid?.();
      return `${at} (owner uid ${info.uid}, mode ${(info.mode & 0o7777).toString(8).padStart(4, '0')}) is not writable by this user`
        + `${me === undefined ? '' : ` (uid ${me})`} (${(err as NodeJS.ErrnoException).code ?? 'EACCES'}): `
        + `run as a user who may, or make the folder beforehand for this one (chown / chmod of ${at}, or install -d -o <user> -m 0700 <folder>)`;
    }
  }
}

/**
 * The first symbolic link on the way to `target` (root first) that leads nowhere — its
 * target does not exist, or links lead back to it (ELOOP) — worded; undefined: none.
 */
async function danglingLink(target: string): Promise<string | undefined> {
  for (const level of levelsOf(path.resolve(target))) {
    const info = await lstat(level).catch(() => undefined);
    if (info === undefined) return undefined;
    if (!info.isSymbolicLink()) continue;
    const code = await stat(level).then(() => undefined, (err: NodeJS.ErrnoException) => err.code ?? 'ENOENT');
    if (code === undefined) continue;
    const to = await readlink(level).catch(() => '?');
    return code === 'ELOOP'
      ? `${level} is a symbolic link to ${to}, which leads back to itself (a loop of links)`
      : `${level} is a symbolic link to ${to}, which does not exist`;
  }
  return undefined;
}
