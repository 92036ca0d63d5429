/**
 * The embedded Redis: when `PIXIU_REDIS_URL` is unset, `pixiu serve` runs its own
 * `redis-server` with `storage/redis.conf` (AOF on), listening only on a unix socket
 * under the data dir, and stops it on exit (DESIGN.md §10).
 *
 * If a previous Pixiu process died without stopping its Redis (SIGKILL), that Redis
 * is still serving the same data dir; it is adopted rather than started twice on one
 * AOF (two servers on one append-only file would corrupt it).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { StartupError } from '../errors.js';
import type { Logger } from '../logger.js';

/** The project's durable Redis configuration, `storage/redis.conf`. */
export const REDIS_CONF_PATH = fileURLToPath(new URL('../../storage/redis.conf', import.meta.url));

/** How to install the binary, shown when it is missing. */
export const REDIS_INSTALL_HINT =
  'install it (Debian/Ubuntu: `sudo apt-get install -y redis-server`; macOS: `brew install redis`) or set PIXIU_REDIS_URL to a running Redis';

/** Longest unix socket path Linux accepts (sun_path is 108 bytes with the NUL). */
const MAX_SOCKET_PATH = 107;
const READY_TIMEOUT_MS = 15_000;
const STOP_TIMEOUT_MS = 10_000;

/** A running embedded Redis. */
export interface LocalRedis {
  /** `unix://…/redis.sock` */
  readonly url: string;
  /** True when this process started it (and so stops it); false when adopted. */
  readonly owned: boolean;
  /** Stops the server if this process started it; a no-op otherwise. Waits for exit. */
  stop(): Promise<void>;
}

/** Options of {@link startLocalRedis}. */
export interface LocalRedisOptions {
  /** Pixiu's data root; Redis keeps its files in `<dataDir>/redis`. */
  readonly dataDir: string;
  readonly logger: Logger;
  /** Defaults to {@link REDIS_CONF_PATH}. */
  readonly confPath?: string;
  /** Defaults to `redis-server` on PATH. */
  readonly binary?: string;
}

/**
 * The embedded Redis's socket for a data dir: `<dataDir>/redis/redis.sock`, or a
 * stable short path in the temp dir when that is longer than a socket path may be.
 */
export function localRedisSocket(dataDir: string): string {
  const dir = path.join(dataDir, 'redis');
  const preferred = path.join(dir, 'redis.sock');
  if (Buffer.byteLength(preferred) <= MAX_SOCKET_PATH) return preferred;
  const digest = createHash('sha256').update(dir).digest('hex').slice(0, 16);
  return path.join(os.tmpdir(), `pixiu-redis-${digest}.sock`);
}

/** Answers true when a Redis on `sock` replies to PING within a second. */
async function answersPing(sock: string): Promise<boolean> {
  if (!existsSync(sock)) return false;
  return await new Promise<boolean>((resolve) => {
    const conn = net.createConnection(sock);
    const done = (ok: boolean): void => {
      conn.destroy();
      resolve(ok);
    };
    conn.setTimeout(1000, () => done(false));
    conn.once('error', () => done(false));
    conn.once('connect', () => conn.write('PING\r\n'));
    conn.once('data', (d) => done(d.toString().startsWith('+PONG')));
  });
}

async function pidAlive(pidFile: string): Promise<boolean> {
  try {
    const pid = Number((await readFile(pidFile, 'utf8')).trim());
    if (!Number.isInteger(pid) || pid <= 0) return false;
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts (or adopts) the embedded Redis for `dataDir`.
 *
 * @throws StartupError when `redis-server` is missing (with the install command), when
 *   it exits before it is ready (with the tail of its log), or is not ready in 15 s
 */
export async function startLocalRedis(opts: LocalRedisOptions): Promise<LocalRedis> {
  const dir = path.join(opts.dataDir, 'redis');
  await mkdir(dir, { recursive: true });
  const sock = localRedisSocket(opts.dataDir);
  const pidFile = path.join(dir, 'redis.pid');
  const url = `unix://${sock}`;

  if ((await pidAlive(pidFile)) && (await answersPing(sock))) {
    opts.logger.warn({ socket: sock }, 'adopting redis-server left running by an earlier pixiu process');
    return { url, owned: false, stop: async () => {} };
  }

  const args = [
    opts.confPath ?? REDIS_CONF_PATH,
    '--dir', dir,
    '--port', '0',
    '--unixsocket', sock,
    '--pidfile', pidFile,
    '--logfile', '',
  ];
  // Its own process group: a Ctrl-C in the terminal must not stop Redis before Pixiu
  // has flushed and closed its connections; Pixiu stops it last.
  const child = spawn(opts.binary ?? 'redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  await waitReady(child, opts.binary ?? 'redis-server');
  opts.logger.info({ socket: sock, dir, pid: child.pid }, 'local redis-server started');
  forwardLog(child, opts.logger);
  return { url, owned: true, stop: () => stopChild(child) };
}

async function waitReady(child: ChildProcess, binary: string): Promise<void> {
  let log = '';
  const ready = new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      log = (log + chunk.toString()).slice(-4000);
      if (/ready to accept connections/i.test(log)) resolve();
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('error', (err: NodeJS.ErrnoException) => {
      reject(err.code === 'ENOENT'
        ? new StartupError(`${binary} not found: ${REDIS_INSTALL_HINT}`, { cause: err })
        : new StartupError(`cannot start ${binary}: ${err.message}`, { cause: err }));
    });
    child.once('exit', (code) => reject(new StartupError(`${binary} exited with code ${code} before it was ready:\n${log.trim()}`)));
  });
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StartupError(`${binary} not ready after ${READY_TIMEOUT_MS} ms:\n${log.trim()}`)), READY_TIMEOUT_MS);
  });
  try {
    await Promise.race([ready, timeout]);
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  } finally {
    clearTimeout(timer);
    child.stdout?.removeAllListeners('data');
    child.stderr?.removeAllListeners('data');
  }
}

/** Redis's own log lines go to the Pixiu log at debug (warnings at warn). */
function forwardLog(child: ChildProcess, logger: Logger): void {
  const onData = (chunk: Buffer): void => {
    for (const line of chunk.toString().split('\n')) {
      if (!line.trim()) continue;
      // Redis marks '#' both warnings and routine shutdown notes; only lines that say
      // WARNING or error are worth a warn in Pixiu's log.
      if (/WARNING|error/i.test(line)) logger.warn({ redis: line }, 'redis-server log');
      else logger.debug({ redis: line }, 'redis-server log');
    }
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
  try {
    await exited;
  } finally {
    clearTimeout(timer);
  }
}
