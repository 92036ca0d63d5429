/**
 * A private `redis-server` for one test file (or one bench): a free port, a temp dir,
 * AOF on or off. It can be stopped, SIGKILLed, frozen (SIGSTOP) and restarted on the
 * same port and data, so tests can inject Redis faults. Tests never touch the
 * machine's Redis on 6379. The server dies with the process that started it, however
 * that process ends (tied-spawn.ts).
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import { spawnTied } from './tied-spawn.js';

/** Options of {@link RedisServer.start}. */
export interface RedisServerOptions {
  /** Append-only file with `appendfsync everysec`; default false. */
  aof?: boolean;
  /** Extra `redis-server` arguments, e.g. `['--maxmemory', '10mb']`. */
  args?: string[];
}

/** How many free ports {@link RedisServer.start} tries when each one is taken before redis-server binds it. */
const BIND_ATTEMPTS = 5;

/** Asks the OS for a free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const srv = net.createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address() as net.AddressInfo;
  srv.close();
  await once(srv, 'close');
  return port;
}

/** A running private `redis-server`. */
export class RedisServer {
  readonly port: number;
  readonly dir: string;
  readonly #opts: RedisServerOptions;
  #child: ChildProcess | undefined;

  private constructor(port: number, dir: string, opts: RedisServerOptions) {
    this.port = port;
    this.dir = dir;
    this.#opts = opts;
  }

  /**
   * Starts a server on a free port in a new temp dir and waits until it answers. A port
   * taken between {@link freePort} and redis-server's bind (another process of a busy
   * run got it first: "Address already in use", seen in a clean-clone CI run) is given
   * up for another free one, up to {@link BIND_ATTEMPTS} ports in all.
   * @param choosePort where each attempt's port comes from: {@link freePort} (a test of this rule passes a port it holds first)
   * @throws Error with redis-server's log when it exits before it is ready for another reason, or on the last port
   */
  static async start(opts: RedisServerOptions = {}, choosePort: () => Promise<number> = freePort): Promise<RedisServer> {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'pixiu-redis-'));
    for (let attempt = 1; ; attempt++) {
      const server = new RedisServer(await choosePort(), dir, opts);
      try {
        await server.restart();
        return server;
      } catch (err) {
        if (attempt >= BIND_ATTEMPTS || !String((err as Error).message).includes('Address already in use')) throw err;
      }
    }
  }

  /** `redis://127.0.0.1:<port>` */
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** True while the process runs. */
  get running(): boolean {
    return this.#child !== undefined;
  }

  /** The running server's pid; undefined while it is stopped. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** (Re)starts the server on the same port and data dir; resolves when it accepts commands. */
  async restart(): Promise<void> {
    if (this.#child) throw new Error('redis-server already running');
    const args = [
      '--port', String(this.port),
      '--bind', '127.0.0.1',
      '--dir', this.dir,
      '--save', '',
      '--appendonly', this.#opts.aof ? 'yes' : 'no',
      '--appendfsync', 'everysec',
      '--daemonize', 'no',
      '--logfile', '',
      ...(this.#opts.args ?? []),
    ];
    // Tied to this process: a test that fails, is cancelled or is killed (a file's
    // timeout) before its clean-up left its redis-server running, adopted by init, for
    // as long as the machine ran (tied-spawn.ts).
    const child = spawnTied('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#child = child;
    let log = '';
    const ready = new Promise<void>((resolve, reject) => {
      const onData = (chunk: Buffer): void => {
        log += chunk.toString();
        if (log.includes('Ready to accept connections')) resolve();
      };
      child.stdout?.on('data', onData);
      child.stderr?.on('data', onData);
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`redis-server exited (${code}) before ready:\n${log}`)));
    });
    child.once('exit', () => {
      if (this.#child === child) this.#child = undefined;
    });
    try {
      await ready;
    } catch (err) {
      this.#child = undefined;
      // The port may have been taken between freePort() and the bind: start() tries another.
      throw err;
    }
    // Keep draining output so the pipe never fills and blocks the server.
    child.stdout?.resume();
    child.stderr?.resume();
  }

  /** Stops the server with SIGTERM (a clean shutdown that finishes the AOF). */
  async stop(): Promise<void> {
    await this.#signal('SIGTERM');
  }

  /** Kills the server with SIGKILL, as a crash. */
  async kill(): Promise<void> {
    await this.#signal('SIGKILL');
  }

  /**
   * Freezes the server with SIGSTOP: connections stay open but nothing is answered, as
   * with a Redis stalled by a long command or a paused VM. {@link resume} thaws it.
   */
  pause(): void {
    this.#child?.kill('SIGSTOP');
  }

  /** Thaws a server frozen by {@link pause} (SIGCONT); it answers what was queued. */
  resume(): void {
    this.#child?.kill('SIGCONT');
  }

  /** Stops the server and removes its temp dir. */
  async destroy(): Promise<void> {
    this.resume();
    await this.#signal('SIGKILL');
    // A background save or AOF rewrite the server forked (a test's CONFIG SET appendonly
    // yes starts one) outlives its SIGKILL and may still write a file into the dir while
    // it is removed: rmdir then fails ENOTEMPTY (seen once in a clean-clone CI run,
    // redis-persistence.test.ts). rm retries that, a few times, 50 ms apart.
    await rm(this.dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 });
  }

  async #signal(signal: NodeJS.Signals): Promise<void> {
    const child = this.#child;
    if (!child) return;
    const exited = once(child, 'exit');
    child.kill(signal);
    await exited;
    this.#child = undefined;
  }
}
