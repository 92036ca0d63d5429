/**
 * A pino logger whose JSON lines are kept in memory, for tests that check what the
 * service logs (levels: 30 info, 40 warn, 50 error).
 */
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';

/** One captured log line: pino's JSON, parsed. */
export type LogLine = Record<string, unknown> & { level: number; msg?: string };

/** A logger at debug whose lines are appended to `lines` as they are written. */
export function capturingLogger(): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done): void {
      for (const text of chunk.toString('utf8').split('\n')) if (text.trim() !== '') lines.push(JSON.parse(text) as LogLine);
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, sink), lines };
}

/** The JSON log lines of a process's output (a serve's stdout) whose `msg` is `msg`; other lines are skipped. */
export function logLines(stdout: string, msg: string): LogLine[] {
  return stdout.split('\n').flatMap((line) => {
    if (!line.includes(msg)) return [];
    try {
      const entry = JSON.parse(line) as LogLine;
      return entry.msg === msg ? [entry] : [];
    } catch {
      return [];
    }
  });
}
