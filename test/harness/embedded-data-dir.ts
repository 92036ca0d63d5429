/**
 * A temp data dir for `pixiu serve` without PIXIU_REDIS_URL (its embedded
 * redis-server, DESIGN.md §10). Should a test fail with serve gone, that redis-server
 * (in a process group of its own) would outlive it: clean-up kills it by its pid file.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { isAlive } from '../../src/process-alive.js';
import type { CleanupContext } from './pixiu-server.js';

/** What {@link embeddedDataDir} answers. */
export interface EmbeddedDataDir {
  readonly dataDir: string;
  /** PIXIU_DATA_DIR, PIXIU_PORT 0 (any free port), PIXIU_LOG_LEVEL info. */
  readonly env: Record<string, string>;
  /** `<dataDir>/redis/redis.pid`, written by the embedded redis-server. */
  readonly pidFile: string;
  /** The pid in {@link pidFile}, read now. */
  redisPid(): Promise<number>;
}

/**
 * Has `t`'s clean-up SIGKILL the embedded redis-server of `dataDir`, by its pid file,
 * if it still runs (a test that failed with serve gone). Call it before the clean-up
 * that removes the data dir: clean-ups run in the order added.
 */
export function killRedisOnCleanup(t: CleanupContext, dataDir: string): void {
  t.after(async () => {
    const pid = Number(await readFile(path.join(dataDir, 'redis', 'redis.pid'), 'utf8').catch(() => ''));
    if (pid > 0 && isAlive(pid)) process.kill(pid, 'SIGKILL');
  });
}

/** Makes the data dir under the OS temp dir; `t`'s clean-up kills its redis-server, then removes it. */
export async function embeddedDataDir(t: CleanupContext, prefix = 'pixiu-embedded-'): Promise<EmbeddedDataDir> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), prefix));
  const pidFile = path.join(dataDir, 'redis', 'redis.pid');
  // Clean-up runs in the order added: the pid file is read before the dir is removed.
  killRedisOnCleanup(t, dataDir);
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  return {
    dataDir, pidFile,
    env: { PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0', PIXIU_LOG_LEVEL: 'info' },
    redisPid: async () => Number(await readFile(pidFile, 'utf8')),
  };
}

/**
 * Pids of the redis-server processes whose command line names `dir` (a data dir: the
 * embedded one's title is `redis-server unixsocket:<dir>/redis/redis.sock`), read from
 * /proc: how a test counts the servers on one data dir.
 */
export function redisServersOf(dir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cmd.startsWith('redis-server') && cmd.includes(dir)) pids.push(Number(entry));
    } catch { /* gone */ }
  }
  return pids;
}
