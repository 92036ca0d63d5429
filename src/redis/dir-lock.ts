/**
 * The lock that keeps one start at a time on a data dir's embedded Redis
 * (docs/decisions.md, "Redis"): two starts at once would otherwise both find no
 * redis-server (or one with no client yet) and run two on one AOF and one socket.
 */
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { StartupError } from '../errors.js';

/**
 * Takes the embedded Redis's lock of a data dir: a LevelDB at `<dir>/lock`, whose LOCK
 * the OS holds for this process until it is closed or the process ends (SIGKILL too).
 * @throws StartupError when another process holds it
 */
export async function lockRedisDir(dir: string, dataDir: string): Promise<{ close(): Promise<void> }> {
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
    throw new StartupError(`cannot open ${location}: ${String((err as { cause?: { message?: unknown } }).cause?.message ?? (err as Error).message)}`, { cause: err });
  }
  return { close: () => db.close() };
}

