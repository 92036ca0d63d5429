/**
 * Opening one partition's LevelDB database (DESIGN.md §3): the folder `<dir>/<p>`,
 * created when missing, locked by LevelDB so one process owns it at a time, and the
 * counter recovered so that an id is never reused.
 */
import { ClassicLevel } from 'classic-level';
import { StartupError } from '../errors.js';
import { MAX_COUNTER } from '../ids/msg-id.js';
import { HIGH_WATER_KEY, counterOfMessageKey, kindRange } from './keys.js';

/** A partition database: binary keys and values (layout in `keys.ts`). */
export type PartitionDb = ClassicLevel<Buffer, Buffer>;

/**
 * Opens (creating if missing) the database in `location` and recovers its counter:
 * the larger of the high-water key and the last record key of each kind.
 * @param location the partition folder
 * @param index the partition number, the first byte of its MsgIDs
 * @throws StartupError naming the folder and what is wrong: locked by another
 *   process, cannot be opened (the path is not a folder, this process may not write
 *   in it, its disk is full, LevelDB files are corrupt), or its counter cannot be read
 */
export async function openPartitionDb(location: string, index: number): Promise<{ db: PartitionDb; counter: number }> {
  const db: PartitionDb = new ClassicLevel<Buffer, Buffer>(location, { keyEncoding: 'buffer', valueEncoding: 'buffer' });
  try {
    await db.open();
  } catch (err) {
    throw openError(location, err);
  }
  try {
    return { db, counter: await recoverCounter(db, index) };
  } catch (err) {
    await db.close();
    throw new StartupError(`store partition folder ${location} cannot be read: ${(err as Error).message}`, { cause: err });
  }
}

async function recoverCounter(db: PartitionDb, index: number): Promise<number> {
  const mark = (await db.get(HIGH_WATER_KEY))?.toString('latin1');
  let counter = mark === undefined ? 0 : Number(mark);
  if (!/^\d+$/.test(mark ?? '0') || counter > MAX_COUNTER) {
    throw new Error(`its counter high-water mark ${JSON.stringify(mark)} is not a counter`);
  }
  for (const kind of [1, 2, 3, 4]) {
    const [last] = await db.keys({ ...kindRange(index, kind), reverse: true, limit: 1 }).all();
    if (last !== undefined) counter = Math.max(counter, counterOfMessageKey(last));
  }
  return counter;
}

/**
 * The StartupError for a database that does not open. classic-level reports every
 * open failure as LEVEL_DATABASE_NOT_OPEN; the reason is in its `cause`.
 */
function openError(location: string, err: unknown): StartupError {
  const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
  const code = cause?.code;
  if (code === 'LEVEL_LOCKED') {
    return new StartupError(
      `store partition folder ${location} is locked by another process (its LevelDB LOCK is held): `
        + 'another pixiu may be using this data dir', { cause: err });
  }
  const why = code === 'EEXIST' || code === 'ENOTDIR'
    ? 'the path exists and is not a folder'
    : String(cause?.message ?? (err as Error).message);
  // Opening writes (its LOCK file, a new log, a table of the old log's records): on a
  // full disk, or in a folder this process may not write in, it fails with LevelDB's
  // IO error, which reads like damage. Say what it is.
  const hint = /No space left on device|ENOSPC/.test(why) ? ' — its disk is full: free space on it and start again'
    : /Permission denied|EACCES/.test(why) ? ` — this process${uidNote()} may not write in it (LevelDB keeps its lock and logs there)`
      : '';
  return new StartupError(`store partition folder ${location} cannot be opened: ${why}${hint}`, { cause: err });
}

/** ` (uid N)` where the platform has uids, to name whom the folder refuses. */
function uidNote(): string {
  const uid = process.getuid?.();
  return uid === undefined ? '' : ` (uid ${uid})`;
}
