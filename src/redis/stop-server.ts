/**
 * Stopping a redis-server process (the embedded one, src/redis/local-server.ts): asked
 * with SIGTERM (it writes its AOF and exits), killed with SIGKILL if it has not ended
 * in time.
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { isAlive } from '../process-alive.js';

/** How long a redis-server asked to stop may take before it is killed, ms. */
export const STOP_TIMEOUT_MS = 10_000;

/**
 * Sends `pid` SIGTERM, then SIGCONT: a server frozen with SIGSTOP (as a hung Redis is
 * tested, and as an operator may freeze it) handles no signal but SIGKILL until it is
 * continued, so without the SIGCONT its stop waited out the whole SIGKILL timeout
 * (10 s, on top of the shutdown's Redis budget: ~19 s to exit, a fresh-user finding).
 * @returns false when the process is gone already
 */
export function askToStop(pid: number): boolean {
  try {
    process.kill(pid, 'SIGTERM');
    process.kill(pid, 'SIGCONT');
    return true;
  } catch {
    return false;
  }
}

/** {@link askToStop} to a process that is not our child, then SIGKILL after the timeout; polls for its end. */
export async function stopPid(pid: number): Promise<void> {
  if (!askToStop(pid)) return;
  const deadline = Date.now() + STOP_TIMEOUT_MS;
  while (isAlive(pid)) {
    if (Date.now() > deadline) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        return;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Stops our child redis-server: {@link askToStop}, then SIGKILL after {@link STOP_TIMEOUT_MS}. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  if (child.pid !== undefined) askToStop(child.pid);
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
  try {
    await exited;
  } finally {
    clearTimeout(timer);
  }
}
