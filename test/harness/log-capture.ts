/**
 * A pino logger whose JSON lines are kept in memory, for tests that check what the
 * service logs (levels: 30 info, 40 warn, 50 error).
 */
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';

/** One captured log line: pino's JSON, parsed. */
export type LogLine = Record<string, unknown> & { level: number; msg?: string };

/**
 * A logger at debug whose lines are appended to `lines` as they are written, parsed, and
 * to `texts` as written (for checks JSON.parse cannot make: {@link duplicateKeys}).
 */
export function capturingLogger(): { logger: Logger; lines: LogLine[]; texts: string[] } {
  const lines: LogLine[] = [];
  const texts: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done): void {
      for (const text of chunk.toString('utf8').split('\n')) {
        if (text.trim() === '') continue;
        texts.push(text);
        lines.push(JSON.parse(text) as LogLine);
      }
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, sink), lines, texts };
}

/**
 * The keys that occur twice in one object of a JSON text (nested objects included),
 * as `path.key`; [] for none. JSON.parse keeps the last of duplicates silently, and so
 * do jq and most log pipelines (pino writes a field named `msg` and its message both
 * as `msg`: an ops finding). `text` must be valid JSON.
 */
export function duplicateKeys(text: string): string[] {
  const found: string[] = [];
  let i = 0;
  const space = (): void => { while (/\s/.test(text[i] ?? '')) i++; };
  const string = (): string => {
    const start = i;
    i++;
    while (text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (path: string): void => {
    space();
    const c = text[i];
    if (c === '"') string();
    else if (c === '{' || c === '[') {
      const close = c === '{' ? '}' : ']';
      const keys = new Set<string>();
      i++;
      space();
      for (let n = 0; text[i] !== close; n++) {
        if (text[i] === ',') i++;
        space();
        let inner = `${path}[${n}]`;
        if (c === '{') {
          const key = string();
          if (keys.has(key)) found.push(`${path}.${key}`);
          keys.add(key);
          space();
          i++; // ':'
          inner = `${path}.${key}`;
        }
        value(inner);
        space();
      }
      i++;
    } else {
      while (i < text.length && !/[,}\]\s]/.test(text[i] ?? '')) i++;
    }
  };
  value('$');
  return found;
}

/** The JSON log lines of a process's output (a serve's stdout) whose `msg` is `msg`; other lines are skipped. */
export function logLines(stdout: string, msg: string): LogLine[] {
  // Looked for as the line holds it: JSON-escaped (a `"` in the message is `\"` there).
  const written = JSON.stringify(msg).slice(1, -1);
  return stdout.split('\n').flatMap((line) => {
    if (!line.includes(written)) return [];
    try {
      const entry = JSON.parse(line) as LogLine;
      return entry.msg === msg ? [entry] : [];
    } catch {
      return [];
    }
  });
}
