/**
 * Whether a LevelDB database folder's disk has room for the database to be reopened
 * (src/store/partition.ts reopens a partition after a failed write). Recovery writes
 * what the newest log holds out as a table, then a new log and manifest: with less room
 * than that, a reopen fails and leaves the database closed, so reads stop too.
 */
import { readdir, stat, statfs } from 'node:fs/promises';
import path from 'node:path';

/**
 * Free bytes a reopen wants besides the log's size (the new log, the manifest, LevelDB's
 * own LOG file).
 */
export const REOPEN_SPARE_BYTES = 1024 * 1024;

/**
 * What the disk of `location` lacks for a reopen: undefined when it has room (or when
 * it cannot be told: the reopen is tried then), else the free bytes it has and the
 * bytes wanted (the largest `*.log` file plus {@link REOPEN_SPARE_BYTES}).
 * @param location the database folder
 */
export async function lackOfRoomToReopen(location: string): Promise<{ free: number; needed: number } | undefined> {
  try {
    const [disk, names] = await Promise.all([statfs(location), readdir(location)]);
    let logBytes = 0;
    for (const name of names) {
      if (name.endsWith('.log')) logBytes = Math.max(logBytes, (await stat(path.join(location, name))).size);
    }
    const free = disk.bavail * disk.bsize;
    const needed = logBytes + REOPEN_SPARE_BYTES;
    return free >= needed ? undefined : { free, needed };
  } catch {
    return undefined;
  }
}
