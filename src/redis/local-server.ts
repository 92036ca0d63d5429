/**
 * The embedded Redis: when `PIXIU_REDIS_URL` is unset, `pixiu serve` runs its own
 * `redis-server` with `storage/redis.conf` (AOF on), listening only on a unix socket
 * under the data dir, and stops it on exit (DESIGN.md §10).
 *
 * If a previous Pixiu process died without stopping its Redis (SIGKILL), that Redis
 * is still serving the same data dir; it is adopted rather than started twice on one
 * AOF (two servers on one append-only file would corrupt it), and from then on it is
 * this process's own: stopped on exit like one it started. One that does not answer
 * (frozen, stuck) is not doubled either: the start is refused (src/redis/left-server.ts).
 *
 * The server is supervised: if it exits while Pixiu runs (killed, crashed, shut down
 * by hand), it is started again on the same data with a back-off (0.2 s doubling to
 * 5 s), and logged. Until it is back, Redis calls fail fast with UNAVAILABLE (503 with
 * Retry-After) as for any Redis outage, and the clients reconnect on their own.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { StartupError, outageFields } from '../errors.js';
import { whyRedisFailed } from './server-log.js';
import type { Logger } from '../logger.js';
import { unixUrl } from './url.js';
import { lockDataDir } from './dir-lock.js';
import { isAlive } from '../process-alive.js';
import { askToStop, stopChild, stopPid } from './stop-server.js';
import { aofRepairAdvice } from './aof-repair.js';
import { leftRunning, type LeftServer, type LeftServerPlace } from './left-server.js';
import { checkPrivateSocketDir, privateSocketDir } from './socket-dir.js';

/** The project's durable Redis configuration, `storage/redis.conf`. */
export const REDIS_CONF_PATH = fileURLToPath(new URL('../../storage/redis.conf', import.meta.url));

/** How to install the binary, shown when it is missing. */
export const REDIS_INSTALL_HINT =
  'install it (Debian/Ubuntu: `sudo apt-get install -y redis-server`; macOS: `brew install redis`) or set PIXIU_REDIS_URL to a running Redis';

/** Longest unix socket path Linux accepts (sun_path is 108 bytes with the NUL). */
const MAX_SOCKET_PATH = 107;
const READY_TIMEOUT_MS = 15_000;

/** A running embedded Redis. */
export interface LocalRedis {
  /** `unix://…/redis.sock` */
  readonly url: string;
  /** False when it was adopted from an earlier process (it is stopped all the same). */
  readonly owned: boolean;
  /** Ends supervision and stops the server (SIGTERM, then SIGKILL after 10 s); waits for exit. */
  stop(): Promise<void>;
  /**
   * Ends supervision and sends the server SIGTERM without waiting: for a process about
   * to exit at once (a second Ctrl-C). Redis then shuts down on its own (writing its
   * AOF), so the exit leaves no orphan behind.
   */
  terminate(): void;
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
  /**
   * True when the caller holds the data dir's lock already (`pixiu serve` takes it before
   * any Redis: dir-lock.ts `lockDataDir`) and closes it itself: not taken here. Default
   * false: taken here, and closed once the server is stopped.
   */
  readonly locked?: boolean;
}

/**
 * The embedded Redis's socket for a data dir: `<dataDir>/redis/redis.sock`, or, when that
 * is longer than a socket path may be, `redis-<hash>.sock` in the service user's private
 * folder of the temp dir (socket-dir.ts `privateSocketDir`), the hash being the data
 * dir's: stable across restarts, one per data dir.
 * @param owner whose folder: this process's uid unless given (the data dir's owner, for
 *   a command looking for the service's Redis)
 */
export function localRedisSocket(dataDir: string, owner?: number): string {
  const dir = path.join(dataDir, 'redis');
  const preferred = path.join(dir, 'redis.sock');
  if (Buffer.byteLength(preferred) <= MAX_SOCKET_PATH) return preferred;
  const digest = createHash('sha256').update(dir).digest('hex').slice(0, 16);
  return path.join(privateSocketDir(owner), `redis-${digest}.sock`);
}

/**
 * Starts (or adopts) the embedded Redis for `dataDir`.
 *
 * @throws StartupError when `redis-server` is missing (with the install command), when
 *   it exits before it is ready (with the tail of its log; on a damaged AOF, its repair),
 *   or is not ready in 15 s; when the data dir is in use (its lock held — taken here
 *   unless `locked` —, or a redis-server left running on it has clients); when a
 *   redis-server left running on it does not answer within left-server.ts
 *   `ADOPT_WAIT_MS` (5 s: its pid, state, and what to do); when the socket's folder in
 *   the temp dir is not this user's alone (socket-dir.ts)
 */
export async function startLocalRedis(opts: LocalRedisOptions): Promise<LocalRedis> {
  const dir = path.join(opts.dataDir, 'redis');
  if (opts.locked === true) return startLocked(opts, dir);
  // Held from before the pid-file check until the server is stopped: two starts on one
  // data dir at once would otherwise both find no server (or one with no client yet)
  // and run two on one AOF and one socket. Its folder is made private
  // (src/files/private-data.ts): the AOF in it holds the cluster secret in clear.
  const lock = await lockDataDir(opts.dataDir);
  try {
    const local = await startLocked(opts, dir);
    return {
      ...local,
      stop: async () => {
        try {
          await local.stop();
        } finally {
          await lock.close();
        }
      },
    };
  } catch (err) {
    await lock.close();
    throw err;
  }
}

async function startLocked(opts: LocalRedisOptions, dir: string): Promise<LocalRedis> {
  const sock = localRedisSocket(opts.dataDir);
  const pidFile = path.join(dir, 'redis.pid');
  const url = unixUrl(sock);
  // A socket in the temp dir: its folder is checked before anything reaches the socket
  // (the left-over probe, at start and at each restart attempt: a temp-dir cleaner may
  // have removed it while Redis was down, and another user made one in its place), and
  // again before each spawn. The node's own client reconnecting is not covered
  // (socket-dir.ts `checkSocketDirIfThere`).
  const checkSocketDir = async (): Promise<void> => {
    if (path.dirname(sock) !== dir) await checkPrivateSocketDir(path.dirname(sock), opts.dataDir);
  };

  const args = [
    opts.confPath ?? REDIS_CONF_PATH,
    '--dir', dir,
    '--port', '0',
    '--unixsocket', sock,
    '--pidfile', pidFile,
    '--logfile', '',
  ];
  const binary = opts.binary ?? 'redis-server';
  const place: LeftServerPlace = { dataDir: opts.dataDir, dir, pidFile, sock, logger: opts.logger };
  const supervisor = new Supervisor(place, checkSocketDir, async () => {
    await checkSocketDir();
    // Its own process group: a Ctrl-C in the terminal must not stop Redis before Pixiu
    // has flushed and closed its connections; Pixiu stops it last.
    const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    await waitReady(child, binary, dir);
    opts.logger.info({ socket: sock, dir, redisPid: child.pid }, 'local redis-server started');
    forwardLog(child, opts.logger);
    return child;
  });
  // A frozen or busy one that does not answer in time stops the start (left-server.ts).
  const left = await supervisor.probeLeft();
  if (left !== undefined) {
    // A Redis left by a SIGKILLed pixiu has no clients: the kernel closed its
    // connections. One with clients serves a pixiu that still runs on this data dir
    // (a second `npm start`, say); adopting it would stop it under that one.
    if (left.clients > 0) {
      throw new StartupError(`data dir ${opts.dataDir} is in use: its redis-server (pid ${left.pid}) has ${left.clients} client connection(s), `
        + 'most likely a pixiu that is still running on it; stop that one first, or give this one another PIXIU_DATA_DIR');
    }
    opts.logger.warn({ socket: sock, redisPid: left.pid }, 'adopting redis-server left running by an earlier pixiu process; it is stopped with this one');
    supervisor.adopt(left.pid);
  } else {
    await supervisor.start();
  }
  return { url, owned: left === undefined, stop: () => supervisor.stop(), terminate: () => supervisor.terminate() };
}

/** How often an adopted server (not our child: no exit event) is checked, ms. */
const ADOPTED_POLL_MS = 1000;
const RESTART_BACKOFF_MS = [200, 400, 800, 1600, 3200, 5000];

/**
 * Keeps the embedded server running: restarts it when it exits unexpectedly, stops it
 * on request. Watches a child through its exit event and an adopted server by polling
 * its pid.
 */
class Supervisor {
  readonly #place: LeftServerPlace;
  readonly #logger: Logger;
  readonly #sock: string;
  readonly #spawn: () => Promise<ChildProcess>;
  /** Run before the start and each restart attempt reach the socket (the left-over probe: {@link probeLeft}). */
  readonly #beforeProbe: () => Promise<void>;
  #child: ChildProcess | undefined;
  #adopted: number | undefined;
  #poll: NodeJS.Timeout | undefined;
  #stopping = false;
  #restarting: Promise<void> | undefined;
  /** Ends the back-off a restart is waiting out, if any ({@link #backoff}). */
  #wake: (() => void) | undefined;

  /**
   * @param beforeProbe checks the socket's place before the start or a restart attempt
   *   probes it ({@link probeLeft}); throws to fail the start, or the attempt (retried, logged)
   * @param spawnServer starts the server and resolves once it is ready
   */
  constructor(place: LeftServerPlace, beforeProbe: () => Promise<void>, spawnServer: () => Promise<ChildProcess>) {
    this.#place = place;
    this.#logger = place.logger;
    this.#sock = place.sock;
    this.#spawn = spawnServer;
    this.#beforeProbe = beforeProbe;
  }

  /** Starts the server and watches it. @throws StartupError as {@link startLocalRedis} */
  async start(): Promise<void> {
    this.#watch(await this.#spawn());
  }

  /**
   * Checks the socket's place, then looks for a server left running on it
   * (left-server.ts `leftRunning`): at start and before each restart attempt.
   * @throws as the `beforeProbe` given, or as `leftRunning`
   */
  async probeLeft(): Promise<LeftServer | undefined> {
    await this.#beforeProbe();
    return leftRunning(this.#place);
  }

  /** Takes over a server started by an earlier process and watches its pid. */
  adopt(pid: number): void {
    this.#adopted = pid;
    this.#poll = setInterval(() => {
      if (this.#stopping || isAlive(pid)) return;
      clearInterval(this.#poll);
      this.#adopted = undefined;
      this.#onExit(`adopted redis-server (pid ${pid}) is gone`);
    }, ADOPTED_POLL_MS);
    this.#poll.unref();
  }

  async stop(): Promise<void> {
    this.#endSupervision();
    await this.#restarting;
    if (this.#child !== undefined) await stopChild(this.#child);
    if (this.#adopted !== undefined) await stopPid(this.#adopted);
  }

  /** {@link LocalRedis.terminate}. */
  terminate(): void {
    this.#endSupervision();
    const pid = this.#child?.pid ?? this.#adopted;
    if (pid !== undefined) askToStop(pid);
  }

  /** No restart from now on: an exit is expected. */
  #endSupervision(): void {
    this.#stopping = true;
    clearInterval(this.#poll);
    // A restart waiting out its back-off ends now: stop() awaits it, and its timer is
    // unref'd, so with nothing else left to run Node ended the process there (exit 0,
    // no "pixiu stopped": a verification newcomer's finding).
    this.#wake?.();
  }

  /** Waits `ms` before a restart attempt, or until supervision ends. */
  #backoff(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms).unref();
      this.#wake = done;
    });
  }

  #watch(child: ChildProcess): void {
    this.#child = child;
    child.once('exit', (code, signal) => {
      if (this.#stopping) return;
      this.#child = undefined;
      this.#onExit(`redis-server exited (code ${code}, signal ${signal})`);
    });
  }

  #onExit(what: string): void {
    this.#logger.error({ socket: this.#sock }, `${what} while pixiu runs; restarting it`);
    this.#restarting = this.#restart().finally(() => { this.#restarting = undefined; });
  }

  async #restart(): Promise<void> {
    for (let attempt = 0; !this.#stopping; attempt++) {
      await this.#backoff(RESTART_BACKOFF_MS[Math.min(attempt, RESTART_BACKOFF_MS.length - 1)] as number);
      if (this.#stopping) return;
      try {
        // Someone may have started it by hand meanwhile: adopt that one rather than
        // run two servers on one AOF (one that does not answer fails this attempt). The
        // socket's folder is checked first: the probe must not reach another user's socket.
        const left = await this.probeLeft();
        if (left !== undefined) {
          this.adopt(left.pid);
        } else {
          await this.start();
        }
        this.#logger.warn({ socket: this.#sock, attempt: attempt + 1 }, 'local redis-server is back');
        return;
      } catch (err) {
        // Why, in Redis's words (server-log.ts); no stack: a retried condition, not a bug.
        this.#logger.error({ ...outageFields(err), attempt: attempt + 1 }, 'cannot restart the local redis-server; retrying');
      }
    }
  }
}

/** @param dir the server's dir, for the repair advice of a damaged AOF (aof-repair.ts) */
async function waitReady(child: ChildProcess, binary: string, dir: string): Promise<void> {
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
    child.once('exit', (code) => {
      const advice = aofRepairAdvice(log, dir);
      reject(new StartupError(`${binary} exited with code ${code} before it was ready:\n${whyRedisFailed(log)}${advice === undefined ? '' : `\n${advice}`}`));
    });
  });
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StartupError(`${binary} not ready after ${READY_TIMEOUT_MS} ms:\n${whyRedisFailed(log)}`)), READY_TIMEOUT_MS);
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
