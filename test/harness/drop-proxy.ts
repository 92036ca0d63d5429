/**
 * A TCP proxy in front of a test's redis-server that drops one connection mid-way, the
 * way a network blip does, with nothing left to chance. From the first command `hold`
 * accepts, Redis's replies on its connection are held back; the first command `drop`
 * accepts then, and every command after it on that connection, never reach Redis (the
 * client has sent them and waits: ioredis resends them once it is back). Once Redis has
 * answered what did reach it, the held replies (at least the `hold` command's) reach the
 * client followed by a reset, which it reads in the same turn of its event loop: the
 * replies free slots of the client's pipeline, and the commands it starts on them find
 * the connection gone (with ioredis's offline queue off they fail at once, unsent).
 * Hold right before the drop: the reset discards what the client's receive buffer
 * cannot take (~128 KB). Every other connection, and every later one, passes straight
 * through. stall-proxy.ts holds commands and delivers them late; blackhole-proxy.ts
 * cuts every connection; this one cuts one, between two commands.
 */
import type net from 'node:net';
import { nextCommand, openLink, ProxyListener, type SeenCommand } from './proxy-link.js';

/** Where {@link DropProxy} holds a connection's replies back from, and where it drops it (each the first command accepted). */
export interface DropMarks {
  readonly hold: (command: SeenCommand) => boolean;
  readonly drop: (command: SeenCommand) => boolean;
}

/** A running proxy; {@link DropProxy.close} in the test's clean-up. */
export class DropProxy {
  readonly #listener: ProxyListener;
  readonly #hold: (command: SeenCommand) => boolean;
  readonly #drop: (command: SeenCommand) => boolean;
  /** The connection holding replies back, once `hold` matched (and dropped at `drop`); later ones pass straight through. */
  #holding: net.Socket | undefined;
  /** The command a connection was dropped at, once its client has been given the end; undefined before. */
  dropped: SeenCommand | undefined;

  private constructor(target: { host: string; port: number }, marks: DropMarks) {
    this.#listener = new ProxyListener((client) => this.#pipe(client, target));
    this.#hold = marks.hold;
    this.#drop = marks.drop;
  }

  /**
   * Listens on a free port of 127.0.0.1 and forwards each connection to `target`.
   * @param marks where the connection's replies are held from, and where it is dropped
   */
  static async start(target: { host: string; port: number }, marks: DropMarks): Promise<DropProxy> {
    const proxy = new DropProxy(target, marks);
    await proxy.#listener.listen();
    return proxy;
  }

  /** `redis://127.0.0.1:<port>` of the proxy. */
  get url(): string {
    return this.#listener.redisUrl;
  }

  #pipe(client: net.Socket, target: { host: string; port: number }): void {
    const link = openLink(client, target, this.#listener.sockets);
    const { upstream } = link;
    let pending = Buffer.alloc(0);
    /** The command this connection was dropped at; undefined while it passes. */
    let at: SeenCommand | undefined;
    const held: Buffer[] = [];
    client.on('data', (chunk: Buffer) => {
      if (at !== undefined) return; // sent after the drop: never reaches Redis
      pending = Buffer.concat([pending, chunk]);
      for (let command = nextCommand(pending); command !== undefined; command = nextCommand(pending)) {
        if (this.#holding === undefined && this.#hold(command)) this.#holding = client;
        if (this.#holding === client && this.#drop(command)) {
          at = { name: command.name, args: command.args };
          // Redis answers what it has, then closes: its 'end' below.
          upstream.end();
          return;
        }
        upstream.write(pending.subarray(0, command.length));
        pending = pending.subarray(command.length);
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      if (this.#holding === client) held.push(chunk);
      else if (!client.destroyed) client.write(chunk);
    });
    upstream.on('end', () => {
      if (at === undefined) return link.end();
      // The held replies, then a reset (RST), as a peer that closed answers a write: the
      // client reads both in one turn of its event loop (libuv takes the hang-up after
      // a short read for the end), so what it starts on those replies finds the
      // connection unwritable. A FIN alone is read a turn later: meanwhile the client
      // writes on into the dead connection, and ioredis resends all of it.
      client.write(Buffer.concat(held));
      client.resetAndDestroy();
      this.dropped = at;
    });
    client.on('close', link.end).on('error', link.end);
    upstream.on('error', link.end);
  }

  /** Stops listening and drops every connection. */
  close(): Promise<void> {
    return this.#listener.close();
  }
}
