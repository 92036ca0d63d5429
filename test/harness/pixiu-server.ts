/**
 * The real Pixiu service for tests, two ways:
 *
 * - {@link startInProcess}: `startService` in the test's own process, on port 0 and a
 *   temp data dir, closed when the test ends. For route tests that also want to reach
 *   into Redis or the service's parts.
 * - {@link spawnServe}: the real `pixiu serve` command as a child process, so a test
 *   can SIGTERM or SIGKILL it and read its exit code and output; {@link runCli} runs
 *   any other subcommand to completion.
 *
 * Both talk HTTP on a real socket through {@link PixiuClient} (global fetch).
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Config, ConfigOverrides } from '../../src/config/config.js';
import type { Logger } from '../../src/logger.js';
import type { Service } from '../../src/service/service.js';
import { RedisServer } from './redis-server.js';
import { REPO_ROOT, SHORT_RUN_FLAG } from './test-build.js';
import { spawnTied } from './tied-spawn.js';
import { PixiuClient } from './pixiu-client.js';

export { REPO_ROOT } from './test-build.js';
export { PixiuClient, type HttpAnswer, type RequestOptions } from './pixiu-client.js';
/** The `pixiu` command's entry point, run through tsx. */
export const CLI_MAIN = path.join(REPO_ROOT, 'src/cli/main.ts');
/** The built entry point `npm start` runs (`npm ci` builds it: the `prepare` script). */
const BUILT_MAIN = path.join(REPO_ROOT, 'dist/cli/main.js');

let cliEntryMemo: readonly string[] | undefined;

/**
 * The node arguments that run `pixiu` ({@link SHORT_RUN_FLAG} first): the build
 * (`dist/cli/main.js`, as `npm start` runs it) when it is newer than every file under
 * `src/`, else `src/cli/main.ts` through tsx. The build starts in about half the time
 * (0.6 s against 1.1 s a run on a 2-core VM: tsx looks up and loads every module's
 * transpiled form), and the CLI tests run it some 200 times; a tree edited since its
 * last build runs its sources.
 */
export function cliEntry(): readonly string[] {
  cliEntryMemo ??= [SHORT_RUN_FLAG, ...(builtIsCurrent() ? [BUILT_MAIN] : ['--import', 'tsx', CLI_MAIN])];
  return cliEntryMemo;
}

/** True when the build exists and no file under `src/` changed after it. */
function builtIsCurrent(): boolean {
  let built: number;
  try {
    built = statSync(BUILT_MAIN).mtimeMs;
  } catch {
    return false;
  }
  const newest = (dir: string): number => Math.max(0, ...readdirSync(dir, { withFileTypes: true }).map((e) => {
    const full = path.join(dir, e.name);
    return e.isDirectory() ? newest(full) : statSync(full).mtimeMs;
  }));
  return newest(path.join(REPO_ROOT, 'src')) <= built;
}
/**
 * How long a spawned `pixiu serve` may take to print its listening line. Its start is
 * not what any test times, and on a loaded 2-core machine it is slow: 8-26 s measured
 * at load ~20 (two at once), where the former 30 s was passed.
 */
const LISTEN_TIMEOUT_MS = 60_000;

/** What a test context offers for clean-up (`TestContext` has it). */
export interface CleanupContext {
  after(fn: () => unknown): void;
}

/** Clean-up steps gathered for a whole file (`before` … `after`), run in reverse. */
export interface CleanupList extends CleanupContext {
  /** Runs every step, last added first, each even when an earlier one failed. */
  run(): Promise<void>;
}

/** A {@link CleanupList} for services started in `before` and stopped in `after`. */
export function cleanupList(): CleanupList {
  const steps: Array<() => unknown> = [];
  return {
    after: (fn) => { steps.push(fn); },
    run: async () => {
      const errors: unknown[] = [];
      for (const step of steps.splice(0).reverse()) {
        try {
          await step();
        } catch (err) {
          errors.push(err);
        }
      }
      // The causes in the message: the test runner prints an AggregateError's message, not its errors.
      if (errors.length > 0) throw new AggregateError(errors, `clean-up failed: ${errors.map((e) => (e instanceof Error ? e.message : String(e))).join('; ')}`);
    },
  };
}

/** A new temp dir under os.tmpdir(), removed when the test ends. */
export async function tempDataDir(t: CleanupContext, prefix = 'pixiu-data-'): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A service started in the test's process. */
export interface InProcessServer {
  readonly service: Service;
  readonly config: Config;
  /** Authorized with the service's API token. */
  readonly client: PixiuClient;
  /**
   * The clock (Date.now, ms) just before the service was started and once it listened:
   * its start read the clock for its time floor in between.
   */
  readonly startedBetween: { readonly from: number; readonly to: number };
}

/**
 * Starts the service in this process: temp data dir, port 0, log level silent, and the
 * given settings (at least the test's `redisUrl`). Closed, and its data dir removed,
 * when the test ends. The machine's environment is not read.
 * @param logger where the service logs (a test reading its lines: log-capture.ts); else none
 * @param opsClock the clock of the operations routes' node-wide rates (startService's
 *   StartOptions.opsClock); default the real one
 */
export async function startInProcess(
  t: CleanupContext, overrides: ConfigOverrides & { redisUrl: string }, logger?: Logger, opsClock?: () => number,
): Promise<InProcessServer> {
  // Loaded here, not with this module: a test file that only runs `pixiu` as a child
  // process then never loads the service (about 0.6 s of CPU per file on a 2-core VM).
  const [{ loadConfig }, { createLogger }, { startService }] = await Promise.all([
    import('../../src/config/config.js'), import('../../src/logger.js'), import('../../src/service/service.js'),
  ]);
  const dataDir = overrides.dataDir ?? await tempDataDir(t);
  // No claims wait (PIXIU_CLAIMS_SETTLE): each test has a Redis, or a key prefix, of its
  // own, started moments before; the tests of the wait set it.
  const config = loadConfig({}, { port: '0', logLevel: 'silent', dataDir, claimsSettleMs: '0', ...overrides });
  const from = Date.now();
  const service = await startService(config, logger ?? createLogger(config.logLevel), undefined, opsClock === undefined ? {} : { opsClock });
  const to = Date.now();
  t.after(() => service.close());
  return { service, config, client: new PixiuClient(service.url, service.secrets.apiToken), startedBetween: { from, to } };
}

/**
 * {@link startInProcess} on a private redis-server of its own, stopped after the
 * service, even when the start fails. Both are one clean-up step of `t`, run in that
 * order: a test context runs its `after` steps in the order they were added (Node 20),
 * so the server's stop, added first, ran before the service's close — which then found
 * its Redis gone, and each of its clients' disconnects left a 2 s timer (ioredis waits
 * that long for a closed socket's `close`) holding the test's process open at its end.
 */
export async function startInProcessAlone(
  t: CleanupContext, overrides: ConfigOverrides = {}, logger?: Logger,
): Promise<{ redis: RedisServer; server: InProcessServer }> {
  const steps = cleanupList();
  t.after(() => steps.run());
  const redis = await RedisServer.start();
  steps.after(() => redis.destroy());
  return { redis, server: await startInProcess(steps, { redisUrl: redis.url, ...overrides }, logger) };
}

/** The environment for a child `pixiu`: the parent's, minus every `PIXIU_` variable. */
function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PIXIU_')));
  // No claims wait unless a test asks for one (see startInProcess).
  return { ...base, PIXIU_CLAIMS_SETTLE: '0', ...env };
}

/** How a child process ended. */
export interface ExitStatus {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** A running server child process (`pixiu serve`, or a bench's own server). */
export interface ServeProcess {
  readonly proc: ChildProcess;
  /** `http://host:port` from its listening log line. */
  readonly url: string;
  /** Everything it wrote so far. */
  stdout(): string;
  stderr(): string;
  /** Resolves when it has exited (at once if it already has). */
  readonly exited: Promise<ExitStatus>;
  /** SIGTERM (graceful shutdown); resolves with how it exited. */
  term(): Promise<ExitStatus>;
  /** SIGKILL (a crash); resolves once it is gone. */
  kill(): Promise<ExitStatus>;
}

/** Collects a child's stdout and stderr as text. */
function collect(proc: ChildProcess): { stdout: () => string; stderr: () => string } {
  let out = '';
  let err = '';
  proc.stdout?.on('data', (chunk: Buffer) => { out += chunk.toString(); });
  proc.stderr?.on('data', (chunk: Buffer) => { err += chunk.toString(); });
  return { stdout: () => out, stderr: () => err };
}

/** Resolves when the process has exited and its output is closed; call right after spawn. */
function exitOf(proc: ChildProcess): Promise<ExitStatus> {
  return once(proc, 'close').then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null }));
}

/** Sends a signal unless the process has already exited, and waits for its exit. */
function signalAndWait(proc: ChildProcess, exited: Promise<ExitStatus>, signal: NodeJS.Signals): Promise<ExitStatus> {
  if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
  return exited;
}

/** The `url` of a complete JSON log line whose `msg` is `listening`, if `line` is one. */
function listeningUrl(line: string, listening: string): string | undefined {
  if (!line.includes(listening)) return undefined;
  try {
    const entry = JSON.parse(line) as { msg?: unknown; url?: unknown };
    return entry.msg === listening && typeof entry.url === 'string' ? entry.url : undefined;
  } catch {
    return undefined;
  }
}

/** How {@link spawnListening} runs its program. */
export interface SpawnOptions {
  /**
   * Load tsx first (`node --import tsx …`), so that `.ts` programs run; default true.
   * False runs plain `node …`, as `npm start` runs the compiled `dist/cli/main.js`: the
   * benches measure the server without tsx's module hooks and its loader thread.
   */
  readonly tsx?: boolean;
  /**
   * The process's limit of open files, soft and hard (util-linux's `prlimit --nofile`,
   * which then execs node: the same pid); default: this process's.
   */
  readonly openFiles?: number;
}

/**
 * Runs a program (`node --import tsx <args…>`, or `node <args…>` with `tsx: false`)
 * from the repository root with `env` added to an environment cleared of `PIXIU_`
 * variables, and resolves once it prints a JSON line `{"msg": <listening>, "url": …}`
 * on stdout.
 *
 * @param t when given, the process is SIGKILLed when the test ends, if still running
 * @throws Error with its output when it exits or stays silent for 60 s before listening
 */
export async function spawnListening(
  args: readonly string[], env: Record<string, string>, t?: CleanupContext, listening = 'pixiu listening',
  opts: SpawnOptions = {},
): Promise<ServeProcess> {
  const loader = opts.tsx === false ? [] : ['--import', 'tsx'];
  const node = [process.execPath, ...loader, ...args];
  const [program = '', ...rest] = opts.openFiles === undefined ? node : ['prlimit', `--nofile=${opts.openFiles}:${opts.openFiles}`, '--', ...node];
  const proc = spawnTied(program, rest, {
    cwd: REPO_ROOT, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = collect(proc);
  const exited = exitOf(proc);
  t?.after(() => signalAndWait(proc, exited, 'SIGKILL'));
  const url = await new Promise<string>((resolve, reject) => {
    let seen = 0;
    const onData = (): void => {
      const text = output.stdout();
      const end = text.lastIndexOf('\n') + 1;
      for (const line of text.slice(seen, end).split('\n')) {
        const found = listeningUrl(line, listening);
        if (found !== undefined) return done(() => resolve(found));
      }
      seen = Math.max(seen, end);
    };
    const timer = setTimeout(() => done(() => {
      proc.kill('SIGKILL');
      reject(new Error(`${args.join(' ')} did not listen within ${LISTEN_TIMEOUT_MS} ms:\n${output.stderr()}`));
    }), LISTEN_TIMEOUT_MS);
    const onExit = (code: number | null): void => done(() =>
      reject(new Error(`${args.join(' ')} exited (${code}) before listening:\n${output.stderr()}\n${output.stdout()}`)));
    function done(settle: () => void): void {
      clearTimeout(timer);
      proc.stdout?.off('data', onData);
      proc.off('exit', onExit);
      settle();
    }
    proc.stdout?.on('data', onData);
    proc.once('exit', onExit);
  });
  return {
    proc,
    url,
    stdout: output.stdout,
    stderr: output.stderr,
    exited,
    term: () => signalAndWait(proc, exited, 'SIGTERM'),
    kill: () => signalAndWait(proc, exited, 'SIGKILL'),
  };
}

/**
 * Runs `pixiu serve` ({@link cliEntry}: the build when current, else the sources through
 * tsx) with `env` added to an environment cleared of `PIXIU_` variables, and resolves
 * once its `pixiu listening` log line is on stdout (the log level must be info or lower).
 *
 * @param t when given, the process is SIGKILLed when the test ends, if still running
 * @throws Error with its output when it exits or stays silent for 60 s before listening
 */
export function spawnServe(env: Record<string, string>, t?: CleanupContext): Promise<ServeProcess> {
  // cliEntry() holds `--import tsx` itself when it runs the sources.
  return spawnListening([...cliEntry(), 'serve'], env, t, 'pixiu listening', { tsx: false });
}

/**
 * `run(item)` for every item, at most `concurrency` at a time (CLI runs are separate
 * processes: started together, a test of many refusals waits for the slowest few
 * rather than for their sum); answers `[item, result]` pairs in the items' order.
 */
export async function runEach<T, R>(items: readonly T[], run: (item: T) => Promise<R>, concurrency = 4): Promise<Array<[T, R]>> {
  const results: Array<[T, R]> = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      const item = items[i] as T;
      results[i] = [item, await run(item)];
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  return results;
}

/** What a finished CLI run printed, and its exit code. */
export interface CliResult extends ExitStatus {
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs `pixiu <args…>` to completion with `env` added to an environment cleared of
 * `PIXIU_` variables; `as`, when given, is the user (and group) it runs as, which
 * needs a root test run.
 */
export async function runCli(args: readonly string[], env: Record<string, string> = {}, as?: { uid: number; gid: number }): Promise<CliResult> {
  const proc = spawnTied(process.execPath, [...cliEntry(), ...args], {
    cwd: REPO_ROOT, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'], ...as,
  });
  const output = collect(proc);
  const status = await exitOf(proc);
  return { ...status, stdout: output.stdout(), stderr: output.stderr() };
}
