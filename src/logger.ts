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
 * When stdout can no longer be written — its reader went away: a closed pipe (EPIPE),
 * the terminal of a dropped ssh session (EIO after SIGHUP) — logging stops and the
 * process goes on (a graceful stop included). pino itself stops only on EPIPE; any
 * other write error was thrown as an uncaught exception, whose crash line failed the
 * same way, and the process hung retrying it for good, its redis-server still running.
 *
 * @param level a pino level, e.g. `info`; `silent` for none
 */
export function createLogger(level: LevelWithSilent = 'info'): Logger {
  const stdout = pino.destination({ dest: 1, sync: false });
  stdout.on('error', () => {
    const noop = (): void => undefined;
    Object.assign(stdout, { write: () => true, flush: noop, flushSync: noop, end: noop });
  });
  return pino({
    level,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
  }, stdout);
}
