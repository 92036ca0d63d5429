/**
 * Writing a small file (the store's LAYOUT, src/store/layout.ts) so that a reader, or
 * a crash, sees either the whole old content (or no file) or the whole new one, never
 * a part or an empty file: the text is written to a temp file beside it and fsynced,
 * then put in place in one step — `rename` over the old file, or `link` for a file that
 * must not exist yet (EEXIST when another writer's came first; the temp file removed
 * then) — and the folder fsynced
 * (src/files/sync-dir.ts); on a file system without hard links a new file is created in
 * place instead. Each write has a temp file of its own, named with the pid
 * and random bytes and opened `wx`: two processes with one pid (two containers on one
 * volume, both pid 1) never write into each other's.
 */
import { randomBytes } from 'node:crypto';
import { link, open, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import { syncDir } from './sync-dir.js';

/**
 * What `link` answers on a file system without hard links (SMB shares, vfat, exFAT,
 * some FUSE ones): there {@link writeDurably} creates a new file in place instead, its
 * content written and fsynced after the create, so a reader can meet it empty for that
 * long (src/auth/secrets.ts copies instead).
 */
export const NO_HARD_LINKS: ReadonlySet<string | undefined> = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS']);

/** `text` into a new file `name` (opened `wx`: EEXIST when it exists), fsynced. */
async function writeNew(name: string, text: string): Promise<void> {
  const handle = await open(name, 'wx');
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Writes `text` as `file`, atomically and durably (as this module's header says).
 * @param exclusive only when `file` does not exist yet: resolves false, writing
 *   nothing, when it does (another writer created it first); otherwise `file` is
 *   replaced
 * @returns true when written
 * @throws the file system's error (ENOENT when the folder is missing, EACCES, ENOSPC, …);
 *   the temp file is removed first
 */
export async function writeDurably(file: string, text: string, exclusive: boolean): Promise<boolean> {
  const temp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  let tempGone = false;
  try {
    await writeNew(temp, text);
    if (!exclusive) {
      await rename(temp, file);
      tempGone = true;
    } else {
      try {
        await link(temp, file);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'EEXIST') return false;
        if (!NO_HARD_LINKS.has(code)) throw err;
        try {
          await writeNew(file, text);
        } catch (fallback) {
          if ((fallback as NodeJS.ErrnoException).code === 'EEXIST') return false;
          throw fallback;
        }
      }
      // Before the folder's fsync, so that the removal is as durable as the new name.
      await unlink(temp);
      tempGone = true;
    }
    // The new name is durable once the folder is: a crash now keeps the new file.
    await syncDir(path.dirname(file));
    return true;
  } finally {
    if (!tempGone) await unlink(temp).catch(() => undefined);
  }
}
