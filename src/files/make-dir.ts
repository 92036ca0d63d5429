/**
 * Creating the data directory's folders with an error that names the real cause.
 * Node's recursive `mkdir` reports the first failure it met, ENOENT, when a parent could
 * not be made: on a read-only file system a missing data dir read as "no such file or
 * directory" (a fresh-user finding). Here a failure is explained by the deepest folder
 * that exists: not a directory, or not writable (EROFS, EACCES, …).
 */
import { access, constants, mkdir, stat } from 'node:fs/promises';
import path from 'node:path';

/**
 * `mkdir -p dir` (with `mode` for the folders it creates).
 * @throws Error whose message says why: the original error's, or, when that was ENOENT,
 *   what is wrong with the deepest existing ancestor (`/x is not a directory`,
 *   `/x is not writable: EROFS: read-only file system, …`); `cause` is the original
 */
export async function makeDir(dir: string, mode?: number): Promise<void> {
  try {
    await mkdir(dir, { recursive: true, ...(mode === undefined ? {} : { mode }) });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    throw new Error(await whyNot(dir) ?? (err as Error).message, { cause: err });
  }
}

/** What keeps `dir` from being created, found at its deepest existing ancestor; undefined: nothing found. */
async function whyNot(dir: string): Promise<string | undefined> {
  let at = path.resolve(dir);
  for (;;) {
    const parent = path.dirname(at);
    if (parent === at) return undefined;
    at = parent;
    const info = await stat(at).catch(() => undefined);
    if (info === undefined) continue;
    if (!info.isDirectory()) return `${at} is not a directory`;
    try {
      await access(at, constants.W_OK);
      return undefined;
    } catch (err) {
      return `${at} is not writable: ${(err as Error).message}`;
    }
  }
}
