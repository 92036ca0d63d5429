/**
 * A TCP proxy in front of a test's redis-server that can delay what Redis sends to
 * chosen connections: the lag of a socket backed up by a burst, as a connection sees
 * it (every reply and Pub/Sub message late, in order), which an in-process hook on
 * ioredis's events cannot give (a PING's reply, say, does not pass through it).
 *
 * A connection is chosen by what its client sends: the first one whose bytes contain
 * `match` (e.g. the `CLIENT SETNAME` of the node's subscriber, `pixiu:bus:`) is lagged
 * while {@link LagProxy.lag} is set; the other connections pass straight through. What
 * such a connection sends can be held back as well ({@link LagProxy.hold}): a command
 * that reaches Redis late.
 */
import type net from 'node:net';
import { openLink, ProxyListener } from './proxy-link.js';

/** A running proxy; {@link LagProxy.close} in the test's clean-up. */
export class LagProxy {
  readonly #listener: ProxyListener;
  /** Delay of Redis → client bytes on matched connections, ms (0: none). */
  #lagMs = 0;
  /** Every pending delayed write, settled in order; see {@link settled}. */
  #pending: Promise<void> = Promise.resolve();
  /** Matched connections are closed ({@link cut}). */
  #cutting = false;
  /** What matched connections send is held back ({@link hold}). */
  #holding = false;
  /** How to send on what each matched connection open now holds back. */
  readonly #releases = new Set<() => void>();
  /** How to close each matched connection open now. */
  readonly #matched = new Set<() => void>();

  private constructor(target: { host: string; port: number }, match: string) {
    this.#listener = new ProxyListener((client) => this.#pipe(client, target, match));
  }

  /**
   * Listens on a free port of 127.0.0.1 and forwards each connection to `target`.
   * @param match bytes (latin1) a client sends that make its connection one to lag
   */
  static async start(target: { host: string; port: number }, match: string): Promise<LagProxy> {
    const proxy = new LagProxy(target, match);
    await proxy.#listener.listen();
    return proxy;
  }

  /** `redis://127.0.0.1:<port>` of the proxy. */
  get url(): string {
    return this.#listener.redisUrl;
  }

  /** From now on, what Redis sends to matched connections arrives `ms` late (0: on time again; what was delayed still comes in order). */
  lag(ms: number): void {
    this.#lagMs = ms;
  }

  /**
   * While on, matched connections are closed: those open at once, new ones as soon as
   * they are matched (a connection that cannot stay up: a network partition between
   * it and Redis while the others work). Off: they may connect again.
   */
  cut(on: boolean): void {
    this.#cutting = on;
    if (on) for (const end of this.#matched) end();
  }

  /**
   * While on, what matched connections send to Redis is held back (the chunk that makes
   * a connection matched too: the first command naming `match`); off: it is sent on, in
   * order, before anything sent after. Their client sees no error: its commands time out.
   */
  hold(on: boolean): void {
    this.#holding = on;
    if (!on) for (const release of this.#releases) release();
  }

  /** Resolves once everything delayed so far has been written to its client. */
  async settled(): Promise<void> {
    for (let last = this.#pending; ; last = this.#pending) {
      await last;
      if (last === this.#pending) return;
    }
  }

  #pipe(client: net.Socket, target: { host: string; port: number }, match: string): void {
    const { upstream, end: endLink } = openLink(client, target, this.#listener.sockets);
    const held: Buffer[] = [];
    const release = (): void => {
      for (const chunk of held.splice(0)) upstream.write(chunk);
    };
    const end = (): void => {
      endLink();
      this.#matched.delete(end);
      this.#releases.delete(release);
    };
    let matched = false;
    let seen = '';
    // Writes to the client in order: a chunk waits for those before it.
    let chain: Promise<void> = Promise.resolve();
    client.on('data', (chunk: Buffer) => {
      if (!matched) {
        seen = (seen + chunk.toString('latin1')).slice(-4096);
        matched = seen.includes(match);
        if (matched) {
          this.#matched.add(end);
          this.#releases.add(release);
        }
      }
      if (matched && this.#cutting) {
        end();
        return;
      }
      if (matched && this.#holding) held.push(chunk);
      else upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      const delay = matched ? this.#lagMs : 0;
      const due = Date.now() + delay;
      chain = chain.then(async () => {
        const wait = due - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        if (!client.destroyed) client.write(chunk);
      });
      this.#pending = Promise.all([this.#pending, chain]).then(() => undefined);
    });
    client.on('close', end).on('error', end);
    upstream.on('close', () => void chain.then(end)).on('error', end);
  }

  /** Stops listening and drops every connection. */
  close(): Promise<void> {
    return this.#listener.close();
  }
}
