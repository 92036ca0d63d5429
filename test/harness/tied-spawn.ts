/**
 * Child processes that die with the test process that started them, however it dies.
 *
 * A test stops what it started in its clean-ups (`t.after`), and redis-server.ts kills
 * its servers in an `exit` handler as well; but neither runs when the test file's
 * process is SIGKILLed — by node:test's per-file timeout, a runner killed in CI, a
 * crash — and its children, adopted by init, ran on: a file timeout left its
 * `pixiu serve` child and its redis-servers holding CPU and ports for the rest of the run.
 *
 * So every long-lived child of the harness is started through {@link spawnTied}: util-linux's
 * `setpriv --pdeathsig SIGKILL -- <program> <args…>`, which asks Linux
 * (`prctl(PR_SET_PDEATHSIG)`) to SIGKILL it when its parent dies, then execs the
 * program — the same pid, so signals, exit codes, stdio and an IPC channel are the
 * program's own. Chosen over the alternatives (docs/decisions.md, "Tests"):
 *
 * - it covers a SIGKILL of the parent, which no handler in the parent can;
 * - it works for programs we cannot change (redis-server), where a watchdog in the
 *   child (a pipe whose end means "parent gone") would need a wrapper process living
 *   beside each server, and for `pixiu` without a test-only hook in `src/`;
 * - it costs one exec of a small program per spawn (~5 ms of CPU on the 2-core VM at
 *   load ~11, as much as a `/bin/true`; a redis-server start costs more than 27 ms, a
 *   `pixiu` start 0.3-0.6 s) and nothing while the child runs;
 * - `setpriv` is in util-linux, an Essential package of Debian and Ubuntu: on every
 *   machine without an install step.
 *
 * Limits: the signal goes to the child only, not to the processes it starts in turn (an
 * `npm start`'s `node`, the embedded redis-server that `pixiu serve` starts itself, which
 * by design outlives a SIGKILLed pixiu to be adopted: src/redis/local-server.ts). prctl(2)
 * ties the child to the *thread* that forked it, and `spawn` forks on the thread that
 * calls it: the harness spawns from the test's main thread, which ends only with the
 * process (a worker thread's own child, tried on Linux 6.18, survived the worker's end:
 * it was handed to the main thread). A parent that dies between the fork and setpriv's
 * prctl, microseconds, leaves the child untied. Off Linux the child is spawned plainly.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import path from 'node:path';

/** The wrapper: util-linux's `setpriv`. */
const SETPRIV = 'setpriv';

let setprivPath: string | undefined;

/**
 * The absolute path of `setpriv`, looked up once per process on this process's PATH:
 * a child may be given a PATH of its own (a test of `pixiu serve` without
 * redis-server on PATH gives one that lacks /usr/bin), where `setpriv` by name would
 * not be found (spawn ENOENT).
 * @throws Error unless `setpriv` is an executable on PATH
 */
function setprivOnPath(): string {
  if (setprivPath !== undefined) return setprivPath;
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const file = path.join(dir, SETPRIV);
    try {
      accessSync(file, constants.X_OK);
      setprivPath = path.resolve(file);
      return setprivPath;
    } catch {
      // Not in this folder.
    }
  }
  throw new Error('setpriv is not on PATH: the test harness starts its child processes through it so that they die with the test '
    + '(Debian/Ubuntu: `apt-get install -y util-linux`)');
}

/**
 * `spawn(program, args, options)`, the child SIGKILLed by the kernel when this process
 * dies — an exit, a crash or a SIGKILL alike. `proc.pid` is the program's pid.
 * @throws Error when `setpriv` is not on PATH (Linux only)
 */
export function spawnTied(program: string, args: readonly string[], options: SpawnOptions): ChildProcess {
  if (process.platform !== 'linux') return spawn(program, args, options);
  return spawn(setprivOnPath(), ['--pdeathsig', 'SIGKILL', '--', program, ...args], options);
}
