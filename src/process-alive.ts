/**
 * Whether a process of this machine still runs, by its pid: the check behind adopting
 * or stopping the embedded redis-server (src/redis/local-server.ts) and behind taking
 * over a store lease a crashed process left (src/cluster/store-ownership.ts).
 */
import { readFileSync } from 'node:fs';

/**
 * True when process `pid` runs (signal 0: nothing is sent). One of another user exists
 * (EPERM) and counts as running. A zombie — killed, not yet reaped by its parent (a
 * supervisor that waits late, an init that never does) — answers signal 0 but runs
 * nothing: it counts as gone, else a restart after `kill -9` waited out a store lease
 * (~12 s) for it, and stopping an adopted redis-server waited out its SIGKILL timeout.
 */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  return !isZombie(pid);
}

/** True when /proc says process `pid` is a zombie (state Z, or X: dead); false where it cannot be read. */
function isZombie(pid: number): boolean {
  const state = processState(pid);
  return state === 'Z' || state === 'X';
}

/**
 * Process `pid`'s state letter as /proc/<pid>/stat gives it (proc(5)): R running,
 * S sleeping, D waiting on the disk (uninterruptible), T stopped (SIGSTOP), t stopped
 * by a debugger, Z zombie, X dead; undefined where it cannot be read (gone, no /proc).
 */
export function processState(pid: number): string | undefined {
  try {
    // "pid (comm) state …"; comm may hold spaces and parentheses, so the state follows
    // the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.charAt(stat.lastIndexOf(')') + 2) || undefined;
  } catch {
    return undefined;
  }
}
