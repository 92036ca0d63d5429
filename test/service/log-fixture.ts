/**
 * What the log destination's tests share (src/stdout-destination.ts): a child process
 * that logs through the service's logger (harness/fixtures/log-then-exit.ts) and the check
 * of its exit, and a logger writing to a file on a small tmpfs, to be filled.
 */
import type { TestContext } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess, StdioOptions } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { pino, type Logger } from 'pino';
import { stdoutDestination, type LogReports, type StdoutStream } from '../../src/stdout-destination.js';
import { waitUntil, within } from '../harness/checks.js';
import { smallDiskLog } from '../harness/small-disk.js';
import { nodeArgsFor, siblingModule } from '../harness/test-build.js';
import { spawnTied } from '../harness/tied-spawn.js';

const CHILD = siblingModule(import.meta.url, '../harness/fixtures/log-then-exit');

/** A running log-then-exit child. */
export interface LogChild {
  readonly child: ChildProcess;
  /** What it has written on stderr so far. */
  stderr(): string;
  /** Its exit: the code, or the signal that ended it. */
  readonly exited: Promise<[number | null, NodeJS.Signals | null]>;
}

/**
 * Spawns the log-then-exit fixture with `args` (its mode and the mode's arguments) and
 * `stdio` (stderr must be `'pipe'`: it is collected), tied to this process
 * (harness/tied-spawn.ts) and SIGKILLed when the test ends.
 */
export function spawnLogChild(t: TestContext, args: readonly string[], stdio: StdioOptions): LogChild {
  const child = spawnTied(process.execPath, nodeArgsFor(CHILD).concat(args), { stdio });
  t.after(() => child.kill('SIGKILL'));
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => { stderr += c.toString(); });
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  return { child, stderr: () => stderr, exited };
}

/**
 * Asserts that `run` exits with `code` (not by a signal) within `boundMs`, its stderr
 * shown if not.
 * @throws AssertionError on another exit, or none within the bound
 */
export async function exitsWith(run: LogChild, code: number, boundMs: number, what = 'the child\'s exit'): Promise<void> {
  const [exitCode, signal] = await within(boundMs, what, run.exited);
  assert.deepEqual({ code: exitCode, signal }, { code, signal: null }, run.stderr());
}

/** A logger through a {@link stdoutDestination} onto a log file on a small tmpfs, its first line written. */
export interface SmallDiskLogger {
  /** The tmpfs's folder (harness/small-disk.ts `fill` fills it). */
  readonly disk: string;
  /** The log file's path. */
  readonly file: string;
  readonly stream: StdoutStream;
  readonly logger: Logger;
}

/**
 * A pino logger (no `base` fields, no time) through {@link stdoutDestination} with
 * `reports` onto a log file on a fresh 1 MiB tmpfs, once its line `before` is in the
 * file; undefined, the test skipped, when no tmpfs can be mounted (root only).
 */
export async function smallDiskLogger(t: TestContext, reports: LogReports): Promise<SmallDiskLogger | undefined> {
  const log = await smallDiskLog(t);
  if (log === undefined) {
    t.skip('no right to mount a tmpfs');
    return undefined;
  }
  const stream = stdoutDestination(reports, log.fd);
  const logger = pino({ base: null, timestamp: false }, stream);
  logger.info('before');
  await waitUntil('the line before', async () => (await readFile(log.file, 'utf8')).includes('"before"'), 10_000, 20);
  return { disk: log.disk, file: log.file, stream, logger };
}
