/**
 * A `pixiu` subcommand run as a child process that the test talks to while it runs:
 * its stdout is read line by line as it comes (a test waits for a line, never for a
 * time), and it can be signalled alone or, as a terminal's Ctrl-C does, with its whole
 * process group. For a run to completion, see `runCli` in pixiu-server.ts, and
 * {@link runCliOnce} here: one such run shared by the tests of a file. The child dies
 * with the test's process, however that ends (tied-spawn.ts); with `command`, what the
 * program starts in turn (an `npm start`'s node) does not.
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { cp, mkdtemp, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { spawnTied } from './tied-spawn.js';
import { REPO_ROOT, cliEntry, runCli, type CleanupContext, type CliResult, type ExitStatus } from './pixiu-server.js';

/** How long {@link CliProcess.line} waits by default, ms. */
const LINE_TIMEOUT_MS = 30_000;

/** Options of {@link spawnCli}. */
export interface SpawnCliOptions {
  /**
   * Start the child as the leader of a process group of its own, so that
   * `signal(…, { group: true })` reaches it and whatever shares its group, as a
   * terminal's Ctrl-C reaches the foreground job (default false).
   */
  readonly detached?: boolean;
  /**
   * Runs this program and its arguments instead of `pixiu <args…>` (e.g. `['npm',
   * 'start']`, the README's run command), with the same environment and handling.
   */
  readonly command?: readonly [string, ...string[]];
  /** The working directory, default the repository root (e.g. a {@link packageCopy}). */
  readonly cwd?: string;
}

/** A running `pixiu` child process. */
export interface CliProcess {
  readonly proc: ChildProcess;
  /** Everything it wrote to stdout so far. */
  stdout(): string;
  /** Everything it wrote to stderr so far. */
  stderr(): string;
  /** Its complete stdout lines so far. */
  lines(): readonly string[];
  /** Resolves when it has exited and its output is closed (at once if it has). */
  readonly exited: Promise<ExitStatus>;
  /**
   * Resolves with the first complete stdout line (already printed or still to come)
   * that `match` accepts.
   * @param what names the line in the error
   * @throws Error with the output so far when the process exits first or `boundMs` passes
   */
  line(match: (line: string) => boolean, what: string, boundMs?: number): Promise<string>;
  /**
   * Sends `signal` to the process, or with `group` to its whole process group. Does
   * nothing once it has exited.
   * @throws Error for `group` when the process was not started `detached`
   */
  signal(signal: NodeJS.Signals, opts?: { group?: boolean }): void;
}

/**
 * Starts `pixiu <args…>` ({@link cliEntry}: the build when current, else the sources through tsx) from the repository root
 * with `env` added to the test's environment cleared of `PIXIU_` variables.
 *
 * @param t when given, the process is SIGKILLed when the test ends, if still running
 */
export function spawnCli(args: readonly string[], env: Record<string, string>, t?: CleanupContext, opts: SpawnCliOptions = {}): CliProcess {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PIXIU_')));
  const [program, ...argv] = opts.command ?? [process.execPath, ...cliEntry(), ...args];
  const proc = spawnTied(program, argv, {
    cwd: opts.cwd ?? REPO_ROOT, env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: opts.detached ?? false,
  });
  let out = '';
  let err = '';
  const complete: string[] = [];
  const listeners = new Set<() => void>();
  proc.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    const lines = out.split('\n');
    lines.pop();
    if (lines.length > complete.length) {
      complete.push(...lines.slice(complete.length));
      for (const wake of listeners) wake();
    }
  });
  proc.stderr?.on('data', (chunk: Buffer) => { err += chunk.toString(); });
  const exited = once(proc, 'close').then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null }));
  const running = (): boolean => proc.exitCode === null && proc.signalCode === null;
  t?.after(async () => {
    if (running()) proc.kill('SIGKILL');
    await exited;
  });

  const line = (match: (l: string) => boolean, what: string, boundMs = LINE_TIMEOUT_MS): Promise<string> =>
    new Promise<string>((resolve, reject) => {
      let checked = 0;
      let settled = false;
      const settle = (): void => {
        settled = true;
        clearTimeout(timer);
        listeners.delete(check);
      };
      const check = (): void => {
        for (; !settled && checked < complete.length; checked++) {
          const candidate = complete[checked] as string;
          if (match(candidate)) {
            settle();
            resolve(candidate);
          }
        }
      };
      const fail = (why: string): void => {
        if (settled) return;
        settle();
        reject(new Error(`pixiu ${args.join(' ')}: ${why} before ${what}\nstdout:\n${out}\nstderr:\n${err}`));
      };
      const timer = setTimeout(() => fail(`${boundMs} ms passed`), boundMs);
      listeners.add(check);
      check();
      // The last lines come before the close: look at them before giving up.
      void exited.then(() => {
        check();
        fail('it exited');
      });
    });

  return {
    proc,
    stdout: () => out,
    stderr: () => err,
    lines: () => complete,
    exited,
    line,
    signal: (signal, sigOpts = {}) => {
      if (sigOpts.group && opts.detached !== true) throw new Error('a process group signal needs a child spawned detached');
      if (!running() || proc.pid === undefined) return;
      if (sigOpts.group) process.kill(-proc.pid, signal);
      else proc.kill(signal);
    },
  };
}

/**
 * The `url` of a `pixiu serve` JSON log line `{"msg": "pixiu listening", "url": …}`,
 * or undefined when `line` is not one.
 */
export function listeningUrl(line: string): string | undefined {
  if (!line.includes('pixiu listening')) return undefined;
  try {
    const entry = JSON.parse(line) as { msg?: unknown; url?: unknown };
    return entry.msg === 'pixiu listening' && typeof entry.url === 'string' ? entry.url : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A copy of the package's buildable tree in a temp dir — package.json, the lock, the
 * tsconfigs, `src/`, `scripts/`, `storage/redis.conf`, and `node_modules` as a link to
 * the repository's — for a test that runs `npm start`, whose build rewrites `dist/`:
 * run in the repository, it rewrote the files other test files' `pixiu` processes were
 * loading at that moment (a half-written module is a SyntaxError at their import).
 * Removed when the test ends.
 * @returns the copy's root
 */
export async function packageCopy(t: CleanupContext): Promise<string> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'pixiu-package-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  for (const name of ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'src', 'scripts', 'storage/redis.conf']) {
    await cp(path.join(REPO_ROOT, name), path.join(root, name), { recursive: true });
  }
  await symlink(path.join(REPO_ROOT, 'node_modules'), path.join(root, 'node_modules'), 'dir');
  return root;
}

/** The runs of {@link runCliOnce}, by their arguments. */
const onceRuns = new Map<string, Promise<CliResult>>();

/**
 * `runCli(args)` with no environment of its own, run once per test file (process):
 * for a text every ask gets alike, such as a `--help`, that several tests of a file
 * read — each run is a `pixiu` start of some 0.35 s of CPU. Whichever test asks first
 * runs it, so the tests stay independent of their order.
 */
export function runCliOnce(args: readonly string[]): Promise<CliResult> {
  const key = JSON.stringify(args);
  let run = onceRuns.get(key);
  if (run === undefined) onceRuns.set(key, (run = runCli(args)));
  return run;
}
