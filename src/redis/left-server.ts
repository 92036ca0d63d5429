/**
 * A redis-server an earlier pixiu left running on its data dir: the embedded Redis runs
 * in a process group of its own, so it outlives a SIGKILLed pixiu (src/redis/local-server.ts).
 * It is found through its pid file, told apart from another program that has since been
 * given that pid, and asked over its socket whether it answers. One that answers is
 * adopted (or, with clients, the data dir is in use). One that is this data dir's
 * redis-server but does not answer — frozen by SIGSTOP or a paused container, stuck in
 * a long fsync or fork, swapped out — makes the start refuse: a second redis-server
 * beside it would share its append-only file, and the first, once it runs again, writes
 * into that file under the second (its expirations; an AOF rewrite of its older data
 * rolls inboxes back or leaves a file Redis cannot load). docs/decisions.md, "Embedded Redis".
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readlinkSync, realpathSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { StartupError } from '../errors.js';
import type { Logger } from '../logger.js';
import { isAlive, processState } from '../process-alive.js';

/**
 * How long a left-over redis-server of the data dir may take to answer before the start
 * is refused, ms: a Redis busy for a moment (a slow fsync, a fork) is still adopted.
 */
export const ADOPT_WAIT_MS = 5_000;
/** How long one probe waits for Redis's answer, ms. */
const PROBE_TIMEOUT_MS = 1_000;
/** Pause between probes that failed at once (no socket, connection refused), ms. */
const PROBE_PAUSE_MS = 250;

/** Where a data dir's embedded Redis is, and the log to tell what is found there. */
export interface LeftServerPlace {
  readonly dataDir: string;
  /** `<dataDir>/redis`, the server's working dir (`--dir`). */
  readonly dir: string;
  /** `<dataDir>/redis/redis.pid` (`--pidfile`). */
  readonly pidFile: string;
  /** Its unix socket (`--unixsocket`, local-server.ts `localRedisSocket`). */
  readonly sock: string;
  readonly logger: Logger;
}

/** A left-over redis-server that answered. */
export interface LeftServer {
  readonly pid: number;
  /** Its client connections, the probe's not counted: more than 0 means a pixiu still uses it. */
  readonly clients: number;
}

/**
 * The redis-server left running on the data dir, if any: the live process its pid file
 * names, when that process is this data dir's redis-server ({@link isServerOf}; another
 * program given the pid is ignored, logged at info) and answers within
 * {@link ADOPT_WAIT_MS}. Undefined when there is none (or it ends while waited for).
 * @throws StartupError when it is this data dir's redis-server and does not answer in
 *   time: the message names its pid, its state and what to do
 */
export async function leftRunning(place: LeftServerPlace): Promise<LeftServer | undefined> {
  const pid = await pidOf(place.pidFile);
  if (pid === undefined) return undefined;
  if (!isServerOf(pid, place)) {
    place.logger.info({ redisPid: pid, pidFile: place.pidFile }, 'the redis pid file names a process that is not this data dir\'s redis-server (its pid was reused); it is left alone');
    return undefined;
  }
  const deadline = Date.now() + ADOPT_WAIT_MS;
  let warned = false;
  for (;;) {
    const began = Date.now();
    const clients = await otherClients(place.sock);
    if (clients !== undefined) return { pid, clients: clients === 0 ? 0 : await fewestClients(place.sock, clients) };
    if (!isAlive(pid)) return undefined;
    if (Date.now() >= deadline) throw new StartupError(notAnswering(pid, place));
    if (!warned) {
      warned = true;
      place.logger.warn({ redisPid: pid, socket: place.sock, waitMs: ADOPT_WAIT_MS, state: processState(pid) },
        'the redis-server left running on this data dir does not answer; waiting for it (a second one is never started beside it)');
    }
    await delay(Math.max(0, Math.min(PROBE_PAUSE_MS - (Date.now() - began), deadline - Date.now())));
  }
}

/** How many more times a count of clients above 0 is asked again, {@link RECOUNT_PAUSE_MS} apart. */
const RECOUNTS = 3;
const RECOUNT_PAUSE_MS = 100;

/**
 * The fewest clients of {@link RECOUNTS} more probes and `first`: connections closed
 * while the server could not run (a SIGKILLed pixiu's, probes given up on a frozen
 * one) still count in its first answers once it runs again, until its event loop has
 * read their end; a pixiu's connections stay.
 */
async function fewestClients(sock: string, first: number): Promise<number> {
  let fewest = first;
  for (let n = 0; n < RECOUNTS && fewest > 0; n++) {
    await delay(RECOUNT_PAUSE_MS);
    fewest = Math.min(fewest, await otherClients(sock) ?? fewest);
  }
  return fewest;
}

/** The refusal's words: what was found, why no second server, and what the operator can do. */
function notAnswering(pid: number, place: LeftServerPlace): string {
  const state = processState(pid);
  const stopped = state === 'T' || state === 't';
  const now = stopped
    ? `It is stopped (state ${state}: SIGSTOP, a debugger, a paused container): continue it with \`kill -CONT ${pid}\` and start again, and it is adopted`
    : `It is alive but busy (state ${state ?? 'unknown'}${state === 'D' ? ': waiting on the disk' : ''}; a long fsync or fork, swapped out): wait for it and start again, and it is adopted`;
  return `data dir ${place.dataDir} is in use by a redis-server that does not answer: pid ${pid} (named in ${place.pidFile}) did not answer on ${place.sock} `
    + `within ${ADOPT_WAIT_MS / 1000} s, and a second redis-server on the same append-only file would corrupt it, so none is started. `
    + `${now}. Or stop it and start again: \`kill ${pid}\` (it writes its AOF and exits; a stopped one only once continued: `
    + `\`kill -CONT ${pid}\` after it), or \`kill -9 ${pid}\` if it does not end (the AOF survives that, less at most its last second or two of writes)`;
}

/** The pid in Redis's pid file when that process is alive, else undefined. */
async function pidOf(pidFile: string): Promise<number | undefined> {
  try {
    const pid = Number((await readFile(pidFile, 'utf8')).trim());
    return Number.isInteger(pid) && pid > 0 && isAlive(pid) ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * True when process `pid` is the redis-server of `place`: its program is named
 * redis-server (its comm, or the first word of its command line) and it works in
 * `place.dir` (its cwd: Redis changes to `--dir`) or its command line names
 * `place.sock` (Redis's process title `redis-server unixsocket:<sock>`, or
 * `--unixsocket <sock>` without one). A pid file outlives its server, and the pid may
 * since be another program's — one that must neither be stopped nor block the start.
 * Without /proc (macOS) the command line is read with `ps`.
 */
export function isServerOf(pid: number, place: Pick<LeftServerPlace, 'dir' | 'sock'>): boolean {
  const line = commandLine(pid);
  if (line === undefined) return false;
  const program = path.basename(line.split(' ')[0] ?? '');
  if (!program.startsWith('redis-server') && !readProc(pid, 'comm')?.startsWith('redis-server')) return false;
  return worksIn(pid, place.dir) || namesSocket(line, place.sock);
}

/** Process `pid`'s command line, its arguments joined by spaces; undefined when it is gone. */
function commandLine(pid: number): string | undefined {
  const raw = readProc(pid, 'cmdline');
  if (raw !== undefined) return raw.replace(/\0+/g, ' ').trim();
  if (existsSync('/proc/self')) return undefined;
  try {
    return execFileSync('ps', ['-ww', '-o', 'args=', '-p', String(pid)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** `/proc/<pid>/<name>`'s text, trimmed; undefined where it cannot be read. */
function readProc(pid: number, name: string): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/${name}`, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** True when process `pid`'s working dir is `dir` (false where that cannot be read: another user's). */
function worksIn(pid: number, dir: string): boolean {
  try {
    return readlinkSync(`/proc/${pid}/cwd`) === realpathSync(dir);
  } catch {
    return false;
  }
}

/** True when `line` names `sock` as a whole word after `unixsocket:` or `--unixsocket `. */
function namesSocket(line: string, sock: string): boolean {
  const words = ` ${line} `;
  return words.includes(` unixsocket:${sock} `) || words.includes(` --unixsocket ${sock} `);
}

/**
 * Asks the Redis on `sock` for its client count (`INFO clients`), this probe not
 * counted. Undefined when nothing there answers as Redis within {@link PROBE_TIMEOUT_MS}.
 */
async function otherClients(sock: string): Promise<number | undefined> {
  if (!existsSync(sock)) return undefined;
  return await new Promise<number | undefined>((resolve) => {
    const conn = net.createConnection(sock);
    let reply = '';
    const done = (clients: number | undefined): void => {
      conn.destroy();
      resolve(clients);
    };
    conn.setTimeout(PROBE_TIMEOUT_MS, () => done(undefined));
    conn.once('error', () => done(undefined));
    conn.once('connect', () => conn.write('INFO clients\r\n'));
    conn.on('data', (d: Buffer) => {
      reply += d.toString('latin1');
      // A bulk string ($) is Redis answering; anything else is not a Redis we can use.
      if (!reply.startsWith('$')) return done(undefined);
      const count = /connected_clients:(\d+)\r\n/.exec(reply)?.[1];
      if (count !== undefined) done(Math.max(0, Number(count) - 1));
    });
  });
}
