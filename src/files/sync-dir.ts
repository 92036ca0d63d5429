/**
 * fsync of a folder, which makes a rename, link or create in it durable (a crash after
 * it keeps the new name). Some file systems refuse fsync on a folder (some FUSE and
 * network ones: EINVAL, ENOTSUP/EOPNOTSUPP, EISDIR); there the folder's names are as
 * durable as that file system makes them, and a start must not fail for it. PostgreSQL
 * (`fsync_fname`, src/backend/storage/file/fd.c) ignores the same errors for folders
 * only, for the same reason; an fsync of a file is never excused.
 */
import { open } from 'node:fs/promises';

/** The codes a file system answers fsync on a folder with when it does not support it. */
const REFUSED_CODES: ReadonlySet<string> = new Set(['EINVAL', 'ENOTSUP', 'EOPNOTSUPP', 'EISDIR']);

/**
 * Whether `err`, thrown by fsync on a folder, says the file system does not support
 * fsync on folders (EINVAL, ENOTSUP, EOPNOTSUPP or EISDIR), which {@link syncDir}
 * ignores; any other error (EIO, ENOSPC, …) is a real failure.
 */
export function dirSyncUnsupported(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' && REFUSED_CODES.has(code);
}

/**
 * fsyncs the folder `dir` (after a rename, link or create in it); a file system that
 * does not support it ({@link dirSyncUnsupported}) is not an error.
 * @throws the error of opening the folder, or of an fsync the file system failed
 */
export async function syncDir(dir: string): Promise<void> {
  const folder = await open(dir, 'r');
  try {
    await folder.sync();
  } catch (err) {
    if (!dirSyncUnsupported(err)) throw err;
  } finally {
    await folder.close();
  }
}
