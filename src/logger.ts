/**
 * The process logger (pino). Messages are fixed lowercase phrases; context goes in
 * fields (`user`, `conn`, `seq`, `err`) so logs can be searched (shared/STYLE.md).
 * Server faults log at error, client faults at info or debug.
 */
import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

/**
 * Creates the root logger, JSON lines on stdout.
 *
 * @param level a pino level, e.g. `info`; `silent` for none
 */
export function createLogger(level: LevelWithSilent = 'info'): Logger {
  return pino({
    level,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}
