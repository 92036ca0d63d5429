/**
 * The log's destination: stdout through pino's SonicBoom, asynchronous, kept alive
 * through a write failure that can pass and stopped by one that cannot.
 *
 * - The reader went away for good — a closed pipe (EPIPE), the terminal of a dropped
 *   ssh session (EIO after SIGHUP), a descriptor that is gone (EBADF): logging stops and
 *   the process goes on (a graceful stop included). pino itself stops only on EPIPE;
 *   any other write error was thrown as an uncaught exception, whose crash line failed
 *   the same way, and the process hung retrying it for good.
 * - The file stdout goes to cannot grow now — a full disk (ENOSPC), a quota (EDQUOT),
 *   a file size limit (EFBIG): the lines are held and written once it can, with the cut
 *   line first, so the file stays whole JSON lines. SonicBoom keeps the bytes a write
 *   failed to take and tries them again at the next line; at most
 *   {@link LOG_HOLD_MAX_BYTES} are held, and the lines past that are dropped and
 *   counted. The first line that goes through again is followed by one warning giving
 *   the error, how long the log could not be written and how many lines were dropped
 *   (a walk13 finding: a full log disk, freed again, had stopped the log until the
 *   next restart, so every later error and the shutdown were lost).
 *   While writes fail, the exit's synchronous flush is skipped: it would retry forever
 *   (SonicBoom's `flushSync` sleeps and retries every error but EAGAIN's refusal).
 */
import { pino } from 'pino';

/** Most bytes of log lines held while stdout cannot be written (8 MiB); the lines past it are dropped and counted. */
export const LOG_HOLD_MAX_BYTES = 8 * 1024 * 1024;

/** Write errors after which stdout is given up for good: its reader or descriptor is gone. */
const GONE = new Set(['EPIPE', 'EIO', 'EBADF', 'ECONNRESET']);

/** A write failure stdout has not recovered from yet. */
interface Stall {
  /** The write error's code (`ENOSPC`, …). */
  readonly code: string;
  /** When the first write failed (ms since the Unix epoch). */
  readonly since: number;
}

/** What the destination reports once the log writes again after a failure. */
export interface LogRecovered {
  /** The write error's code, e.g. `ENOSPC`. */
  readonly code: string;
  /** How long writes failed, ms. */
  readonly failedMs: number;
  /** Lines dropped meanwhile (past {@link LOG_HOLD_MAX_BYTES}). */
  readonly dropped: number;
}

/** pino's destination stream (SonicBoom), as `pino.destination` answers it. */
export type StdoutStream = ReturnType<typeof pino.destination>;

/**
 * Opens stdout as the log's destination with the rules above.
 * @param onRecovered called (on a later tick) after the first line that stdout took
 *   again following a failure that can pass; the logger warns with it
 * @param fd the descriptor to write (1, stdout; another in tests)
 */
export function stdoutDestination(onRecovered: (what: LogRecovered) => void, fd = 1): StdoutStream {
  const stream = pino.destination({ dest: fd, sync: false, maxLength: LOG_HOLD_MAX_BYTES });
  let stall: Stall | undefined;
  let dropped = 0;
  const noop = (): void => undefined;
  const flushSync = stream.flushSync.bind(stream);
  stream.flushSync = () => {
    if (stall === undefined) flushSync();
  };
  stream.on('drop', () => { dropped++; });
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (GONE.has(err.code ?? '')) {
      Object.assign(stream, { write: () => true, flush: noop, flushSync: noop, end: noop });
      return;
    }
    stall ??= { code: err.code ?? 'unknown', since: Date.now() };
  });
  stream.on('write', () => {
    if (stall === undefined) return;
    const what: LogRecovered = { code: stall.code, failedMs: Date.now() - stall.since, dropped };
    stall = undefined;
    dropped = 0;
    // After SonicBoom has released the bytes it just wrote: this event comes before.
    setImmediate(onRecovered, what);
  });
  return stream;
}
