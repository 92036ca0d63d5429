/**
 * A TCP proxy in front of a test's redis-server that sends Redis another command in
 * place of a chosen one: the first `count` commands named `name` (e.g. `config`), or
 * that a predicate accepts (e.g. one user's append), that clients send through it go
 * to Redis as `swap` instead, so the client reads Redis's
 * answer to the swap, in the order of its own commands (no reply is made up or
 * reordered). With an EVAL returning `redis.error_reply('LOADING …')`, a CONFIG GET
 * meets what a Redis loading its data answers (a failure that may pass), exactly once
 * and at no moment left to chance; with one returning a list, what a managed Redis
 * that hides some settings answers; with one returning `READONLY …` for an append, a
 * failover's refusal of that one append. test/harness/lag-proxy.ts delays a connection's
 * replies, blackhole-proxy.ts cuts every connection, stall-proxy.ts holds every command
 * from a chosen one on; this one changes one command.
 */
import type net from 'node:net';
import { nextCommand, openLink, ProxyListener, relayReplies, type SeenCommand } from './proxy-link.js';

/** A command in Redis's protocol (RESP array of bulk strings), as a client sends it. */
function encodeCommand(args: readonly string[]): Buffer {
  return Buffer.from(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`);
}

/** A running proxy; {@link CommandSwapProxy.close} in the test's clean-up. */
export class CommandSwapProxy {
  readonly #listener: ProxyListener;
  readonly #matches: (command: SeenCommand) => boolean;
  readonly #swap: Buffer;
  #left: number;

  private constructor(target: { host: string; port: number }, name: string | ((command: SeenCommand) => boolean), swap: readonly string[], count: number) {
    this.#listener = new ProxyListener((client) => this.#pipe(client, target));
    const lower = typeof name === 'string' ? name.toLowerCase() : undefined;
    this.#matches = typeof name === 'string' ? (command) => command.name === lower : name;
    this.#swap = encodeCommand(swap);
    this.#left = count;
  }

  /**
   * Listens on a free port of 127.0.0.1 and forwards each connection to `target`.
   * @param name the command to swap (`config`; any case), or which commands to swap
   * @param swap the command sent in its place, e.g. `['EVAL', "return redis.error_reply('LOADING …')", '0']`
   * @param count how many commands `name` names are swapped, over all connections; later ones pass
   */
  static async start(target: { host: string; port: number }, name: string | ((command: SeenCommand) => boolean), swap: readonly string[], count = 1): Promise<CommandSwapProxy> {
    const proxy = new CommandSwapProxy(target, name, swap, count);
    await proxy.#listener.listen();
    return proxy;
  }

  /** `redis://127.0.0.1:<port>` of the proxy. */
  get url(): string {
    return this.#listener.redisUrl;
  }

  /** How many commands are still to be swapped. */
  get left(): number {
    return this.#left;
  }

  #pipe(client: net.Socket, target: { host: string; port: number }): void {
    const link = openLink(client, target, this.#listener.sockets);
    const { upstream } = link;
    let pending = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      for (let command = nextCommand(pending); command !== undefined; command = nextCommand(pending)) {
        const swapped = this.#left > 0 && this.#matches(command);
        if (swapped) this.#left -= 1;
        upstream.write(swapped ? this.#swap : pending.subarray(0, command.length));
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
