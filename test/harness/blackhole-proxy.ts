/**
 * A TCP proxy in front of a test's redis-server that can cut a node's whole link to
 * Redis the way a partition does, not the way a refused connection does: blackholed,
 * the bytes of every connection are held in both directions while both sockets stay
 * open (Redis still counts the node's Pub/Sub subscriber, and a PUBLISH to it is
 * "received"); reset, every connection is closed with a RST and what was held is
 * dropped (a NAT or firewall that lost its state), and new connections pass again.
 * test/harness/lag-proxy.ts delays one chosen connection; this one cuts them all.
 */
import net from 'node:net';
import { ProxyListener } from './proxy-link.js';

/** One proxied connection. */
interface Link {
  readonly client: net.Socket;
  /** Undefined while a connection accepted during a blackhole waits: Redis never saw it. */
  upstream: net.Socket | undefined;
}

/** A running proxy; {@link BlackholeProxy.close} in the test's clean-up. */
export class BlackholeProxy {
  readonly #listener: ProxyListener;
  readonly #target: { host: string; port: number };
  readonly #links = new Set<Link>();
  #holding = false;

  private constructor(target: { host: string; port: number }) {
    this.#listener = new ProxyListener((client) => this.#accept(client));
    this.#target = target;
  }

  /** Listens on a free port of 127.0.0.1 and forwards each connection to `target`. */
  static async start(target: { host: string; port: number }): Promise<BlackholeProxy> {
    const proxy = new BlackholeProxy(target);
    await proxy.#listener.listen();
    return proxy;
  }

  /** `redis://127.0.0.1:<port>` of the proxy. */
  get url(): string {
    return this.#listener.redisUrl;
  }

  /** From now on nothing passes either way on any connection, and none is closed. */
  blackhole(): void {
    this.#holding = true;
  }

  /** Every connection is reset (RST both ways), what was held dropped; new connections pass. */
  reset(): void {
    this.#holding = false;
    for (const link of this.#links) this.#end(link);
  }

  #accept(client: net.Socket): void {
    const link: Link = { client, upstream: undefined };
    this.#links.add(link);
    client.on('error', () => this.#end(link)).on('close', () => this.#end(link));
    // Held bytes are dropped, never delivered late: the only way out of a blackhole is a reset.
    client.on('data', (chunk: Buffer) => {
      if (!this.#holding) link.upstream?.write(chunk);
    });
    if (this.#holding) return; // accepted, never connected on: a SYN into the void
    const upstream = net.connect(this.#target.port, this.#target.host);
    link.upstream = upstream;
    upstream.on('data', (chunk: Buffer) => {
      if (!this.#holding && !client.destroyed) client.write(chunk);
    });
    upstream.on('error', () => this.#end(link)).on('close', () => this.#end(link));
  }

  #end(link: Link): void {
    if (!this.#links.delete(link)) return;
    for (const socket of [link.client, link.upstream]) if (socket && !socket.destroyed) socket.resetAndDestroy();
  }

  /** Stops listening and drops every connection. */
  close(): Promise<void> {
    this.reset();
    return this.#listener.close();
  }
}
