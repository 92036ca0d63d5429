/**
 * CPU use of other processes, from Linux's /proc, so a bench can say which process was
 * busy during a measure (server, Redis, load generator) and how long each waited for
 * a CPU while runnable — on a machine shared with other work, that wait is the noise.
 */
import { readFileSync } from 'node:fs';

/** Clock ticks per second of /proc times (USER_HZ; 100 on Linux everywhere in practice). */
const TICKS_PER_SECOND = 100;

/** User + system CPU time of all threads of `pid` so far, ms; 0 when it cannot be read. */
export function cpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces, inside parentheses).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks * 1000) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/**
 * Time the main thread of `pid` spent runnable but waiting for a CPU so far, ms
 * (/proc/<pid>/schedstat, second field, ns); 0 when it cannot be read.
 */
export function runQueueWaitMs(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e6;
  } catch {
    return 0;
  }
}

/** What {@link CpuMeter.stop} answers, per process name, in % of the interval. */
export interface CpuUse {
  /** CPU time, all threads, % of one core. */
  readonly cpu: Record<string, number>;
  /** Main thread runnable but not running, % of the interval. */
  readonly wait: Record<string, number>;
}

/** CPU use of several processes over an interval. */
export class CpuMeter {
  readonly #pids: Record<string, number>;
  #cpu0: Record<string, number> = {};
  #wait0: Record<string, number> = {};
  #startAt = 0;

  constructor(pids: Record<string, number>) {
    this.#pids = pids;
  }

  /** Starts an interval. */
  start(): void {
    this.#startAt = performance.now();
    this.#cpu0 = this.#each(cpuMs);
    this.#wait0 = this.#each(runQueueWaitMs);
  }

  /** CPU use of each process since {@link start}. */
  stop(): CpuUse {
    const wall = performance.now() - this.#startAt;
    const pct = (now: Record<string, number>, then: Record<string, number>): Record<string, number> =>
      Object.fromEntries(Object.keys(now).map((k) => [k, wall > 0 ? (100 * ((now[k] ?? 0) - (then[k] ?? 0))) / wall : 0]));
    return { cpu: pct(this.#each(cpuMs), this.#cpu0), wait: pct(this.#each(runQueueWaitMs), this.#wait0) };
  }

  #each(read: (pid: number) => number): Record<string, number> {
    return Object.fromEntries(Object.entries(this.#pids).map(([name, pid]) => [name, read(pid)]));
  }
}
