/**
 * Writing a small file (the store's LAYOUT, src/store/layout.ts; a generated secret,
 * src/auth/secrets.ts) so that a reader, or a crash, sees either the whole old content
 * (or no file) or the whole new one, never a part or an empty file: the text is written
 * to a temp file beside it and fsynced, then put in place in one step — `rename` over
 * the old file, or `link` for a file that must not exist yet (EEXIST when another
 * writer's came first; the temp file removed then) — and the folder fsynced
 * (src/files/sync-dir.ts); on a file system without hard links a new file is created in
 * place instead. Each write has a temp file of its own, `<file>.<pid>.<8 hex>.tmp`,
 * opened `wx`: two processes with one pid (two containers on one volume, both pid 1)
 * never write into each other's. A process killed between the temp file's write and
 * its placing leaves it behind: {@link removeLeftTemps} removes those.
 */
import { randomBytes } from 'node:crypto';
import { link, open, readdir, rename, rm, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import { isAlive } from '../process-alive.js';
import { syncDir } from './sync-dir.js';

/**
 * What `link` answers on a file system without hard links (SMB shares, vfat, exFAT,
 * some FUSE ones): there {@link writeDurably} creates a new file in place instead, its
 * content written and fsynced after the create, so a reader can meet it empty for that
 * long.
 */
const NO_HARD_LINKS: ReadonlySet<string | undefined> = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS']);

/** The temp files of this process's writes in progress, resolved paths: {@link removeLeftTemps} leaves them be. */
const writing = new Set<string>();

/** Options of {@link writeDurably}. */
export interface DurableWriteOptions {
  /**
   * Permission bits of a file this write creates (less the process's umask), e.g.
   * `0o600` for a secret its owner only may read. Default `0o666`, as `open`'s. The temp
   * file has them from its creation, so the content is never readable more widely.
   */
  readonly mode?: number;
}

/** `text` into a new file `name` (opened `wx`: EEXIST when it exists) with `mode`, fsynced. */
async function writeNew(name: string, text: string, mode: number): Promise<void> {
  const handle = await open(name, 'wx', mode);
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
export async function writeDurably(file: string, text: string, exclusive: boolean, opts: DurableWriteOptions = {}): Promise<boolean> {
  const mode = opts.mode ?? 0o666;
  const temp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const resolved = path.resolve(temp);
  writing.add(resolved);
  let tempGone = false;
  try {
    await writeNew(temp, text, mode);
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
          await writeNew(file, text, mode);
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
    writing.delete(resolved);
  }
}

/**
 * Removes the temp files of {@link writeDurably} writes of `file` that a process killed
 * between a temp file's write and its placing left behind: `<file>.<pid>.<8 hex>.tmp`
 * of a pid no longer running (src/process-alive.ts), or of this process's own pid when
 * it is no write of this process in progress and was last written before this process
 * began: in a container node has the same pid at every start, so a write the last run
 * was killed in has it too (a review's M2: it was never removed). A write in progress of
 * a running process is left alone, also one of another pid namespace with this pid (two
 * containers on one volume, both pid 1) begun since this process did; so is any other
 * name. Failures are ignored: a temp file left is only untidy (and holds nothing in use,
 * at most a second name of the file a write placed, when it was killed between a
 * secret's `link` and the temp file's removal).
 * The pid is judged in this process's pid namespace: a container sharing the volume
 * whose write is in progress at that moment may have its temp file removed, and then
 * fails that write (ENOENT), never writing a partial file.
 */
export async function removeLeftTemps(file: string): Promise<void> {
  const dir = path.dirname(file);
  const escaped = path.basename(file).replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const pattern = new RegExp(`^${escaped}\\.(\\d+)\\.[0-9a-f]{8}\\.tmp$`);
  const entries = await readdir(dir).catch(() => [] as string[]);
  await Promise.all(entries.map(async (entry) => {
    const pid = Number(pattern.exec(entry)?.[1]);
    if (!Number.isSafeInteger(pid)) return;
    const temp = path.join(dir, entry);
    const left = pid === process.pid ? !writing.has(path.resolve(temp)) && await writtenBeforeStart(temp) : !isAlive(pid);
    if (left) await rm(temp, { force: true }).catch(() => undefined);
  }));
}

/** True when `name` was last modified before this process began (false when it cannot be read). */
async function writtenBeforeStart(name: string): Promise<boolean> {
  try {
    return (await stat(name)).mtimeMs < performance.timeOrigin;
  } catch {
    return false;
  }
}
