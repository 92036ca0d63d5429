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
 *   failed to take and tries them again at the next line, and this module every
 *   {@link LOG_RETRY_MS} (a quiet node logs nothing for hours: walk16 F2.1); at most
 *   {@link LOG_HOLD_MAX_BYTES} are held, and the lines past that are dropped and
 *   counted. Once every held line is written again — not at the first write through:
 *   a disk with a little room freed takes part of them and fails again (review33 F3) —
 *   one warning follows, giving the error, how long the log could not be written and
 *   how many lines were dropped (a walk13 finding: a full log disk, freed again, had
 *   stopped the log until the next restart, so every later error and the shutdown were
 *   lost).
 * - Lines are dropped with no write failing too: a reader slower than the log (a pipe
 *   that takes nothing more, with no error) lets {@link LOG_HOLD_MAX_BYTES} pile up, and
 *   a single line longer than that is never held. Such drops get a warning of their own
 *   with their count, at most one per {@link LOG_DROP_WARN_MS}, written when there is
 *   room for it (review33 F2: they were only counted into the next failure's warning).
 * - At exit, the held lines are written once, synchronously, up to the first write
 *   error (stdout-exit-flush.ts): SonicBoom's own `flushSync` retries every error but
 *   EAGAIN's refusal for good, and hung the exit on a disk that had filled since the
 *   last line went through (review33 F1). A line so left cut in a file is ended with a
 *   newline by the next start, before its first line, so that one parses (walk16 F2.2).
 */
import { fstatSync, openSync, closeSync, readSync } from 'node:fs';
import { pino } from 'pino';
import { flushHeldOnce } from './stdout-exit-flush.js';

/** Most bytes of log lines held while stdout cannot be written (8 MiB); the lines past it are dropped and counted. */
export const LOG_HOLD_MAX_BYTES = 8 * 1024 * 1024;

/** While writes fail, the held lines are tried again this often (ms), also when nothing new is logged. */
export const LOG_RETRY_MS = 1000;

/** At most one warning of lines dropped with no write failing per this many ms; the drops meanwhile are counted into the next. */
export const LOG_DROP_WARN_MS = 10_000;

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
  /** How long writes failed, ms: from the first failure until every held line was written. */
  readonly failedMs: number;
  /** Lines dropped meanwhile (past {@link LOG_HOLD_MAX_BYTES}). */
  readonly dropped: number;
}

/** What the destination tells its logger, each on a later tick than the write it follows; the logger logs them. */
export interface LogReports {
  /** Every line held through a write failure that can pass has been written. */
  recovered(what: LogRecovered): void;
  /**
   * Lines were dropped with no write failing (a slow reader, a line longer than
   * {@link LOG_HOLD_MAX_BYTES}): `lines` of them since the last report, at most once per
   * {@link LOG_DROP_WARN_MS}. A line logged in this call that is dropped too (no room
   * yet) leaves the count to a later call, after the next write.
   */
  dropped(lines: number): void;
}

/** pino's destination stream (SonicBoom), as `pino.destination` answers it. */
export type StdoutStream = ReturnType<typeof pino.destination>;

/**
 * Opens stdout as the log's destination with the rules above.
 * @param reports what to log when the log writes again or dropped lines
 * @param fd the descriptor to write (1, stdout; another in tests)
 */
export function stdoutDestination(reports: LogReports, fd = 1): StdoutStream {
  const stream = pino.destination({ dest: fd, sync: false, maxLength: LOG_HOLD_MAX_BYTES });
  // A line an earlier run left cut (it stopped on a full disk) ends before ours begins.
  if (endsMidLine(fd)) stream.write('\n');
  let stall: Stall | undefined;
  let dropped = 0;
  // A write of nothing makes SonicBoom try the held bytes again (its minLength is 0).
  let retry: NodeJS.Timeout | undefined;
  const stopRetry = (): void => {
    clearInterval(retry);
    retry = undefined;
  };
  const noop = (): void => undefined;
  stream.flushSync = () => flushHeldOnce(stream);

  /** When the last warning of drops was logged (ms since the Unix epoch). */
  let dropsReportedAt = -Infinity;
  let dropReport: NodeJS.Timeout | undefined;
  /** Set while the warning of drops is being logged: a drop then is that warning's own. */
  let reporting: { lost: boolean } | undefined;
  /** Warns of drops with no write failing, thinned; those in a failure go into its warning. */
  const reportDrops = (): void => {
    if (dropReport !== undefined || stall !== undefined || dropped === 0) return;
    dropReport = setTimeout(() => {
      dropReport = undefined;
      if (stall !== undefined || dropped === 0) return;
      const report = { lost: false };
      reporting = report;
      try {
        reports.dropped(dropped);
      } finally {
        reporting = undefined;
      }
      // No room for the warning either: tried again after the next write.
      if (report.lost) return;
      dropped = 0;
      dropsReportedAt = Date.now();
    }, Math.max(0, dropsReportedAt + LOG_DROP_WARN_MS - Date.now())).unref();
  };
  stream.on('drop', () => {
    if (reporting !== undefined) {
      reporting.lost = true;
      return;
    }
    dropped++;
    reportDrops();
  });
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (GONE.has(err.code ?? '')) {
      stopRetry();
      clearTimeout(dropReport);
      Object.assign(stream, { write: () => true, flush: noop, flushSync: noop, end: noop });
      return;
    }
    stall ??= { code: err.code ?? 'unknown', since: Date.now() };
    retry ??= setInterval(() => stream.write(''), LOG_RETRY_MS).unref();
  });
  // SonicBoom emits 'drain' when a write leaves nothing held; 'write' (any write through,
  // a partial one included) came too early.
  stream.on('drain', () => {
    if (stall === undefined) return;
    const what: LogRecovered = { code: stall.code, failedMs: Date.now() - stall.since, dropped };
    stall = undefined;
    dropped = 0;
    stopRetry();
    setImmediate(() => reports.recovered(what));
  });
  stream.on('write', reportDrops);
  return stream;
}

/**
 * Whether `fd` is a regular file whose last byte is not a newline: the last line of an
 * earlier run, cut by a full disk as it stopped (its held lines could not be written).
 * Read through /proc/self/fd (the descriptor itself is open for writing only); false
 * wherever that cannot be read (not Linux, a pipe, a terminal, an empty file).
 */
function endsMidLine(fd: number): boolean {
  try {
    const stat = fstatSync(fd);
    const size = stat.size;
    if (!stat.isFile() || size === 0) return false;
    const reader = openSync(`/proc/self/fd/${fd}`, 'r');
    try {
      const last = Buffer.alloc(1);
      return readSync(reader, last, 0, 1, size - 1) === 1 && last[0] !== 0x0a;
    } finally {
      closeSync(reader);
    }
  } catch {
    return false;
  }
}
