/**
 * The process logger (pino). Messages are fixed lowercase phrases; context goes in
 * fields (`user`, `conn`, `seq`, `err`) so logs can be searched (shared/STYLE.md).
 * Server faults log at error, client faults at info or debug.
 */
import { pino, type Logger, type LevelWithSilent } from 'pino';
import { stdoutDestination } from './stdout-destination.js';

export type { Logger };

/**
 * Creates the root logger, JSON lines on stdout (stdout-destination.ts: a reader gone
 * for good stops the log, not the process; a full disk holds the lines until they can
 * be written, then warns how long the log was stalled; lines dropped past 8 MiB held
 * are warned of, thinned).
 *
 * @param level a pino level, e.g. `info`; `silent` for none
 */
export function createLogger(level: LevelWithSilent = 'info'): Logger {
  const logger: Logger = pino({
    level,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
  }, stdoutDestination({
    recovered: (what) => logger.warn({ code: what.code, failedMs: what.failedMs, droppedLines: what.dropped },
      'stdout could not be written for a while: the log lines of that time come late, and those past 8 MiB held were dropped'),
    dropped: (lines) => logger.warn({ droppedLines: lines },
      'log lines were dropped: stdout took them slower than they came and 8 MiB were held, or a line was longer than 8 MiB'),
  }));
  return logger;
}
