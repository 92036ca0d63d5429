/**
 * A store folder that lost its layout file (`<dir>/LAYOUT`, src/store/layout.ts) while
 * its partitions stayed: deleted by hand, or a restore that left it out. A layout made
 * anew there would name a new store, and every message it had stored would be held by
 * a store no node runs again (DESIGN.md §3, §9). Such a start is refused, before
 * anything is written.
 */
import { access, readdir } from 'node:fs/promises';
import path from 'node:path';
import { StartupError } from '../errors.js';
import { explained } from '../files/make-dir.js';
import { quotedText } from '../text-cut.js';

/**
 * What an opened LevelDB folder (a partition's, src/store/partition.ts) holds: its
 * `CURRENT`, a `MANIFEST-…`, tables (`.ldb`, `.sst`) and logs (`.log`).
 */
const LEVELDB_FILE = /^(CURRENT|MANIFEST-[0-9]+|[0-9]+\.(ldb|sst|log))$/;

/** How the store names its partition folders: `0`, `1`, … (src/store/message-store.ts). */
const PARTITION_NAME = /^[0-9]+$/;

/**
 * Whether a folder under the store folder that could not be listed (`err`, from
 * `readdir`) counts as a partition: only when it is named as the store names them
 * ({@link PARTITION_NAME}) and exists as a folder. Any other name is not one the store
 * made: `lost+found` (root's, mode 0700, when `xiu/` is a volume of its own) or an
 * operator's folder must not refuse a non-root node's first start.
 * @param name the folder's name, directly under the store folder
 */
export function unlistableIsPartition(name: string, err: NodeJS.ErrnoException): boolean {
  return PARTITION_NAME.test(name) && err.code !== 'ENOTDIR' && err.code !== 'ENOENT';
}

/**
 * The folders directly under `dir` that hold LevelDB files (partitions of a store,
 * whatever their names, but `lost+found`), in numeric order; one that cannot be listed
 * counts when {@link unlistableIsPartition} says so. Empty when `dir` does not exist.
 * @throws StartupError when `dir` exists and cannot be listed
 */
async function partitionFolders(dir: string): Promise<string[]> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw new StartupError(`cannot read the store folder ${dir}: ${await explained(dir, err)}`, { cause: err });
  }
  const found: string[] = [];
  for (const entry of entries) {
    if ((!entry.isDirectory() && !entry.isSymbolicLink()) || entry.name === 'lost+found') continue;
    const files = await readdir(path.join(dir, entry.name))
      .catch((err: NodeJS.ErrnoException) => (unlistableIsPartition(entry.name, err) ? ['CURRENT'] : []));
    if (files.some((name) => LEVELDB_FILE.test(name))) found.push(entry.name);
  }
  return found.sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
}

/**
 * Refuses to make a new layout in `dir` while it holds a store's partitions: its LAYOUT
 * was lost (deleted, or a restore without it). Made anew, it would name a new store with
 * a new block of partitions, and every message in the old ones would be held by a store
 * no node runs again (503 for ever, deliveries naming them stalled). A folder with no
 * partition in it (a new data dir, or an empty `xiu/`) passes, and so does one whose
 * LAYOUT exists by the time its partitions are found. Run once a read found no LAYOUT.
 * @param dir the store folder, `<data dir>/xiu`
 * @throws StartupError naming the file, the partition folders (up to 8) and what to
 *   do (restore the file; without a backup, rebuild it or move the folder aside); or
 *   when `dir` exists and cannot be listed
 */
export async function refuseOrphaning(dir: string): Promise<void> {
  const folders = await partitionFolders(dir);
  // A start beside this one may have made the LAYOUT and then its partitions since the
  // caller found none (a LAYOUT is written before any partition): not lost, then.
  if (folders.length === 0 || await access(path.join(dir, 'LAYOUT')).then(() => true, () => false)) return;
  // Names read from the disk: nothing in them may break the line or drive the terminal.
  // A plain one (printable ASCII, as the store names them) is shown as it is.
  const shown = folders.slice(0, 8).map((name) => quotedText(name, 255, { bare: true }));
  const named = folders.length > 8 ? `${shown.join(', ')}, …` : shown.join(', ');
  throw new StartupError(`the store layout ${path.join(dir, 'LAYOUT')} is missing, but ${dir} holds message partitions (${named}): `
    + 'started without it, this data dir would become a new store and every message in them would be orphaned; '
    + `restore ${path.join(path.basename(dir), 'LAYOUT')} from the backup the data dir came from; without one, rebuild it from the store's claim `
    + `or move ${path.basename(dir)}/ aside to start a new store on purpose (README "Backups and restores")`);
}
