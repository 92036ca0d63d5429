/**
 * Thousands of WebSocket clients in a child process of their own (ws-swarm-child.ts),
 * for broadcast tests and the broadcast bench: the clients' receiving then neither
 * shares an event loop with the server nor with the test's own timing.
 *
 * The swarm counts `bcast` frames per connection and keeps their `bseq`s; `expect`
 * starts a trigger in the child (POSTs to `/v1/broadcast`, or a bare server's
 * `GET /go`) and resolves, with the child's own timings, once every connection has
 * received that many more broadcasts. Every wait is bounded.
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import os from 'node:os';
import type { CleanupContext } from './pixiu-server.js';
import { REPO_ROOT, nodeArgsFor, siblingModule } from './test-build.js';
import { spawnTied } from './tied-spawn.js';

const CHILD = siblingModule(import.meta.url, './ws-swarm-child');

/** One connection to open. */
export interface SwarmConn {
  readonly user: string;
  readonly device?: string;
  /** JWT `tags`. */
  readonly tags?: readonly string[];
  readonly lastBseq?: string;
}

/** What starts the broadcasts an `expect` waits for (run in the child, timed there). */
export type SwarmTrigger =
  /** POST each body to `url` (`/v1/broadcast`) with the API token, all at once. */
  | { readonly kind: 'post'; readonly url: string; readonly token: string; readonly bodies: readonly unknown[] }
  /** One GET (a bare ws server's `/go`). */
  | { readonly kind: 'get'; readonly url: string };

/** Requests to the child. */
export type SwarmRequest =
  | { id: number; op: 'connect'; url: string; jwtSecret?: string; conns: readonly SwarmConn[]; concurrency: number; welcome: boolean }
  | { id: number; op: 'expect'; count: number; timeoutMs: number; trigger?: SwarmTrigger }
  | { id: number; op: 'received' }
  | { id: number; op: 'close' };

/** A request before it is numbered. */
type Unnumbered<R> = R extends SwarmRequest ? Omit<R, 'id'> : never;

/** Timings of one `expect`, ms from the start of its trigger, in the child's clock. */
export interface ExpectResult {
  /** Until every connection had all the expected broadcasts. */
  readonly ms: number;
  /** Until every connection had the first of them. */
  readonly firstAllMs: number;
  /** Until every trigger request was answered. */
  readonly postMs: number;
  /** The `bseq`s the POSTs were answered with, in body order (empty for `get`). */
  readonly bseqs: readonly string[];
}

/** What every connection received so far, in connection order. */
export interface ReceivedReport {
  /** `bseq`s of its `bcast` frames, in arrival order. */
  readonly bseqs: readonly (readonly string[])[];
  /** Types of its other frames besides `welcome`. */
  readonly others: readonly (readonly string[])[];
}

/** Replies from the child. */
export type SwarmReply =
  | { id: number; op: 'connected'; count: number; ms: number }
  | ({ id: number; op: 'expected' } & ExpectResult)
  | ({ id: number; op: 'received' } & ReceivedReport)
  | { id: number; op: 'closed' }
  | { id: number; op: 'failed'; error: string };

/** Options of {@link WsSwarm.connect}. */
export interface SwarmConnectOptions {
  /** HS256 secret to mint each connection's JWT; none: connect without a token (a bare server). */
  readonly jwtSecret?: string;
  /** Handshakes in flight at once; default 50. */
  readonly concurrency?: number;
  /** Wait for each connection's `welcome` frame; default true. */
  readonly welcome?: boolean;
  /** Bound, ms; default 60 s. */
  readonly timeoutMs?: number;
}

/** A running swarm child. */
export class WsSwarm {
  readonly #proc: ChildProcess;
  readonly #exited: Promise<unknown>;
  readonly #pending = new Map<number, (reply: SwarmReply) => void>();
  #stderr = '';
  #next = 1;

  private constructor(proc: ChildProcess) {
    this.#proc = proc;
    this.#exited = once(proc, 'exit');
    proc.stderr?.on('data', (chunk: Buffer) => { this.#stderr += chunk.toString(); });
    proc.on('message', (raw) => {
      const reply = raw as SwarmReply;
      this.#pending.get(reply.id)?.(reply);
      this.#pending.delete(reply.id);
    });
    proc.on('exit', (code, signal) => {
      for (const resolve of this.#pending.values()) resolve({ id: 0, op: 'failed', error: `swarm exited (${code ?? signal}): ${this.#stderr.slice(-2000)}` });
      this.#pending.clear();
    });
  }

  /**
   * Starts the child; it is killed when the test ends (when `t` is given), and dies with
   * the test's process however that ends (tied-spawn.ts).
   * @param nice a scheduling niceness for the child (0–19), so that on a small machine
   *   the clients' receiving yields the CPU to the server being measured
   */
  static start(t?: CleanupContext, nice = 0): WsSwarm {
    const proc = spawnTied(process.execPath, nodeArgsFor(CHILD), { cwd: REPO_ROOT, stdio: ['ignore', 'inherit', 'pipe', 'ipc'] });
    if (nice !== 0 && proc.pid !== undefined) os.setPriority(proc.pid, nice);
    const swarm = new WsSwarm(proc);
    t?.after(() => swarm.kill());
    return swarm;
  }

  /**
   * Sets the child's scheduling niceness from now on (`os.setPriority`; raising it needs
   * no privilege, lowering it does): a swarm started at the default that opens its
   * connections and is then set to 19 connects at a fair share of the CPU and yields it
   * to the server while it receives.
   * @param nice 0–19
   */
  renice(nice: number): void {
    if (this.#proc.pid !== undefined) os.setPriority(this.#proc.pid, nice);
  }

  /** Opens the connections to `url` (`http://host:port`); resolves with the time it took, ms. */
  async connect(url: string, conns: readonly SwarmConn[], opts: SwarmConnectOptions = {}): Promise<number> {
    const reply = await this.#request({
      op: 'connect', url, conns, concurrency: opts.concurrency ?? 50, welcome: opts.welcome ?? true,
      ...(opts.jwtSecret !== undefined ? { jwtSecret: opts.jwtSecret } : {}),
    }, opts.timeoutMs ?? 60_000);
    if (reply.op !== 'connected') throw new Error(`unexpected reply ${reply.op}`);
    return reply.ms;
  }

  /**
   * Starts `trigger` (when given) and resolves once every connection has received
   * `count` more broadcasts than it had when this was called.
   * @throws Error when that does not happen within `timeoutMs`
   */
  async expect(count: number, trigger: SwarmTrigger | undefined, timeoutMs = 60_000): Promise<ExpectResult> {
    const reply = await this.#request({ op: 'expect', count, timeoutMs, ...(trigger ? { trigger } : {}) }, timeoutMs + 10_000);
    if (reply.op !== 'expected') throw new Error(`unexpected reply ${reply.op}`);
    return reply;
  }

  /** Every connection's broadcasts and other frames so far. */
  async received(): Promise<ReceivedReport> {
    const reply = await this.#request({ op: 'received' }, 30_000);
    if (reply.op !== 'received') throw new Error(`unexpected reply ${reply.op}`);
    return reply;
  }

  /** Closes every connection (1000) and waits for the closes. */
  async closeAll(): Promise<void> {
    await this.#request({ op: 'close' }, 30_000);
  }

  /** Ends the child. */
  async kill(): Promise<void> {
    if (this.#proc.exitCode === null && this.#proc.signalCode === null) this.#proc.kill('SIGKILL');
    await this.#exited;
  }

  async #request(req: Unnumbered<SwarmRequest>, timeoutMs: number): Promise<SwarmReply> {
    const id = this.#next++;
    const reply = await new Promise<SwarmReply>((resolve) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        resolve({ id, op: 'failed', error: `no answer to ${req.op} within ${timeoutMs} ms` });
      }, timeoutMs);
      this.#pending.set(id, (r) => {
        clearTimeout(timer);
        resolve(r);
      });
      this.#proc.send({ ...req, id } as SwarmRequest);
    });
    if (reply.op === 'failed') throw new Error(`swarm ${req.op}: ${reply.error}`);
    return reply;
  }
}
