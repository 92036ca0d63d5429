/**
 * The coordinator's side of bench:e2e's load process (bench/lib/e2e-load.ts): forks
 * it with tsx and sends it commands over IPC, each answered once by id.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { REPO_ROOT, type CleanupContext } from '../../test/harness/pixiu-server.js';
import type { LoadCommand, LoadReply, LoadResults } from './e2e-protocol.js';

const LOAD_MAIN = path.join(REPO_ROOT, 'bench/lib/e2e-load.ts');

/** A running load process. */
export class LoadProcess {
  readonly #child: ChildProcess;
  readonly #pending = new Map<number, { resolve: (r: LoadReply) => void }>();
  #nextId = 0;
  #exited = false;

  private constructor(child: ChildProcess) {
    this.#child = child;
    child.on('message', (reply: LoadReply) => {
      this.#pending.get(reply.id)?.resolve(reply);
      this.#pending.delete(reply.id);
    });
    child.once('exit', (code, signal) => {
      this.#exited = true;
      for (const p of this.#pending.values()) p.resolve({ id: -1, ok: false, error: `load process exited (${code ?? signal})` });
      this.#pending.clear();
    });
  }

  /** Forks the load process; it is killed when `t` runs its clean-up, if still running. */
  static start(t: CleanupContext): LoadProcess {
    const child = fork(LOAD_MAIN, [], {
      cwd: REPO_ROOT,
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const load = new LoadProcess(child);
    t.after(() => load.stop());
    return load;
  }

  get pid(): number {
    return this.#child.pid ?? 0;
  }

  /**
   * Sends one command and resolves with its result.
   * @throws Error with the load process's message when the command failed
   */
  async request<K extends LoadCommand['op']>(cmd: Extract<LoadCommand, { op: K }>): Promise<LoadResults[K]> {
    if (this.#exited) throw new Error('load process is gone');
    const id = ++this.#nextId;
    const reply = await new Promise<LoadReply>((resolve) => {
      this.#pending.set(id, { resolve });
      this.#child.send({ ...cmd, id });
    });
    if (!reply.ok) throw new Error(`load process: ${cmd.op} failed: ${reply.error}`);
    // The load process answers each op with that op's result type (e2e-load.ts `handle`).
    return reply.result as LoadResults[K];
  }

  /** Ends the process (closing IPC makes it exit; SIGKILL if it lingers). */
  async stop(): Promise<void> {
    if (this.#exited) return;
    const exited = once(this.#child, 'exit');
    this.#child.disconnect();
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }
}
