/**
 * A TCP proxy in front of a test's redis-server that stalls Redis, as seen by every
 * client through it, from the moment a chosen command is sent: the first command that
 * `match` accepts, and every command sent on any connection after it, reach Redis only
 * once `holdMs` has passed (in each connection's order; replies flow as they come). So
 * a test stalls a node's start in the step it names by one of its commands (the inbox
 * generation's GET, a claims read), as a `CLIENT PAUSE` or a SIGSTOP of redis-server
 * would at that moment, with no timing left to chance. command-swap-proxy.ts changes
 * one command; lag-proxy.ts delays one connection's replies.
 */
import type net from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { nextCommand, openLink, ProxyListener, relayReplies, type SeenCommand } from './proxy-link.js';

/** A running proxy; {@link StallProxy.close} in the test's clean-up. */
export class StallProxy {
  readonly #listener: ProxyListener;
  readonly #match: (command: SeenCommand) => boolean;
  readonly #holdMs: number;
  /** Resolves when the stall is over; undefined until it began. */
  #held: Promise<void> | undefined;
  /** The command that began the stall, once one did. */
  began: SeenCommand | undefined;
  /** When that command came (Date.now), ms; undefined until the stall began. */
  beganAt: number | undefined;

  private constructor(target: { host: string; port: number }, match: (command: SeenCommand) => boolean, holdMs: number) {
    this.#listener = new ProxyListener((client) => this.#pipe(client, target));
    this.#match = match;
    this.#holdMs = holdMs;
  }

  /**
   * Listens on a free port of 127.0.0.1 and forwards each connection to `target`.
   * @param match the command that begins the stall (the first one it accepts)
   * @param holdMs how long the stall lasts from that command, ms
   */
  static async start(target: { host: string; port: number }, match: (command: SeenCommand) => boolean, holdMs: number): Promise<StallProxy> {
    const proxy = new StallProxy(target, match, holdMs);
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
    // Each connection's commands go out in order, each after the stall once it began.
    let sent: Promise<void> = Promise.resolve();
    client.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      for (let command = nextCommand(pending); command !== undefined; command = nextCommand(pending)) {
        if (this.#held === undefined && this.#match(command)) {
          this.began = { name: command.name, args: command.args };
          this.beganAt = Date.now();
          this.#held = delay(this.#holdMs);
        }
        const bytes = pending.subarray(0, command.length);
        const held = this.#held;
        // Before the stall began `held` is undefined: awaiting it costs a tick, no order.
        sent = sent.then(() => held).then(() => void upstream.write(bytes));
        pending = pending.subarray(command.length);
      }
    });
    relayReplies(client, link);
  }

  /** Stops listening and drops every connection. */
  close(): Promise<void> {
    return this.#listener.close();
  }
}
