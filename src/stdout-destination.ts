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
 * - A pipe or FIFO (a shell's `|`, Docker's and containerd's log FIFOs) is written
 *   through a descriptor of its own opened non-blocking ({@link nonBlockingPipe}),
 *   synchronously, in writes of at most {@link PIPE_WRITE_MAX_BYTES}: a reader that
 *   stopped reading makes a write refuse (EAGAIN) instead of wait, and the refused
 *   lines are held as above and tried again, soon at first, then every
 *   {@link PIPE_RETRY_MAX_MS}. On stdout itself, which such a pipe gives blocking, a
 *   thread-pool write waited in the kernel for good, the exit's flush too, and Node's
 *   exit waits for its thread pool: the process never ended on SIGTERM, nor on a second
 *   signal (walk19 F1); and the exit's flush wrote beside the thread's write, half done,
 *   tearing a line (walk19 F2). Written synchronously, no write is ever in flight at
 *   exit, and the held lines follow whole what went before; a write of at most
 *   PIPE_BUF bytes is all or nothing, so only a line longer than that can be left cut
 *   at the end. A socket (journald's stdout) cannot be opened so (ENXIO): it is written
 *   as a file is, and a reader of it that stops still holds the exit.
 */
import { constants, fstatSync, openSync, closeSync, readSync } from 'node:fs';
import { pino } from 'pino';
import { flushHeldOnce } from './stdout-exit-flush.js';

/** Most bytes of log lines held while stdout cannot be written (8 MiB); the lines past it are dropped and counted. */
export const LOG_HOLD_MAX_BYTES = 8 * 1024 * 1024;

/** While writes fail, the held lines are tried again this often (ms), also when nothing new is logged. */
export const LOG_RETRY_MS = 1000;

/** At most one warning of lines dropped with no write failing per this many ms; the drops meanwhile are counted into the next. */
export const LOG_DROP_WARN_MS = 10_000;

/** Largest write to a pipe (bytes): PIPE_BUF on Linux, the size a pipe takes whole or refuses whole. */
export const PIPE_WRITE_MAX_BYTES = 4096;

/** Most time between two tries of a pipe that refused a write (EAGAIN: its reader reads nothing now), ms; the first comes after 1 ms and each next one after twice as long. */
export const PIPE_RETRY_MAX_MS = 100;

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
  const pipe = nonBlockingPipe(fd);
  const stream = pipe === undefined
    ? pino.destination({ dest: fd, sync: false, maxLength: LOG_HOLD_MAX_BYTES })
    // EAGAIN comes back as an 'error' (below), not slept on by SonicBoom for 100 ms,
    // which a synchronous stream does on the thread every log call runs on.
    : pino.destination({ dest: pipe, sync: true, maxLength: LOG_HOLD_MAX_BYTES, maxWrite: PIPE_WRITE_MAX_BYTES, retryEAGAIN: () => false });
  // A line an earlier run left cut (it stopped on a full disk) ends before ours begins.
  if (pipe === undefined && endsMidLine(fd)) stream.write('\n');
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
  // pino flushes an asynchronous destination at exit, not a synchronous one.
  if (pipe !== undefined) process.once('exit', () => stream.flushSync());

  /** When the last warning of drops was logged (ms since the Unix epoch). */
  let dropsReportedAt = -Infinity;
  let dropReport: NodeJS.Timeout | undefined;
  /** Set while the warning of drops is being logged: a drop then is that warning's own. */
  let reporting: { lost: boolean } | undefined;
  /** The last warning found no room: the next is tried only after a write goes through, not at each later drop. */
  let awaitingWrite = false;
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
      if (report.lost) {
        awaitingWrite = true;
        return;
      }
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
    if (!awaitingWrite) reportDrops();
  });
  // A full pipe is tried again soon, then less often while it stays full.
  let pipeRetry: NodeJS.Timeout | undefined;
  let pipePauseMs = 1;
  const pipeFull = (): void => {
    pipeRetry ??= setTimeout(() => {
      pipeRetry = undefined;
      pipePauseMs = Math.min(pipePauseMs * 2, PIPE_RETRY_MAX_MS);
      stream.write('');
    }, pipePauseMs).unref();
  };
  if (pipe !== undefined) {
    // Until then a new line is only held, not tried: a refused write costs ~10 µs a line
    // (its error built), 3 times the rest of a log call. SonicBoom tries no write while
    // `_writing` (sonic-boom 4; set only within this call, so the exit finds it false).
    const write = stream.write.bind(stream);
    const writing = stream as unknown as { _writing: boolean };
    stream.write = (data: string): boolean => {
      if (pipeRetry === undefined || writing._writing) return write(data);
      writing._writing = true;
      try {
        return write(data);
      } finally {
        writing._writing = false;
      }
    };
  }
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EAGAIN' && pipe !== undefined) {
      pipeFull();
      return;
    }
    if (GONE.has(err.code ?? '')) {
      stopRetry();
      clearTimeout(pipeRetry);
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
  stream.on('write', (n: number) => {
    if (n > 0) pipePauseMs = 1;
    awaitingWrite = false;
    reportDrops();
  });
  return stream;
}

/**
 * A descriptor of its own, non-blocking, to the pipe or FIFO `fd` writes to, opened
 * through /proc/self/fd (a new open file description of the same pipe: `fd`'s, shared
 * with the processes that gave it, stays blocking), or undefined when `fd` is no pipe
 * or cannot be so opened: not Linux, a socket (ENXIO), a FIFO whose reader is gone
 * (ENXIO too). Opened close-on-exec, and never closed: it lives as long as the process.
 */
function nonBlockingPipe(fd: number): number | undefined {
  try {
    if (!fstatSync(fd).isFIFO()) return undefined;
    return openSync(`/proc/self/fd/${fd}`, constants.O_WRONLY | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
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
