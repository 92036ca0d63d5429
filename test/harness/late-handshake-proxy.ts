/**
 * A TCP proxy in front of a node that can hold a handshake back the way a slow uplink
 * does (docs/protocol.md, "A handshake that never ends"): the connection accepted next
 * after {@link LateHandshakeProxy.hold} gets no upstream; what its client sends is
 * buffered, not forwarded, while the client waits and gives up (its socket closes). On
 * {@link Held.release} the request reaches the node late, and the client's FIN trails
 * it: sent once the node has answered, i.e. after the node admitted the handshake
 * (`device` under "Connecting": such a handshake closes the device's connection 4002,
 * once). Every other connection passes straight through. lag-proxy.ts delays what
 * Redis sends, blackhole-proxy.ts drops what it holds; this one delivers it late.
 */
import net from 'node:net';
import { once } from 'node:events';
import { ProxyListener } from './proxy-link.js';

/** A handshake held back by the proxy. */
export interface Held {
  /** Resolves once the client has given up on it: its socket to the proxy closed. */
  readonly givenUp: Promise<void>;
  /**
   * Sends what the client sent to the node on a connection of its own, and once the node
   * has answered, ends it (a FIN: the client left). Resolves with the answer's status
   * line, e.g. `HTTP/1.1 101 Switching Protocols` for a handshake admitted.
   */
  release(): Promise<string>;
}

/** A running proxy; {@link LateHandshakeProxy.close} in the test's clean-up. */
export class LateHandshakeProxy {
  readonly #listener: ProxyListener;
  readonly #target: number;
  /** Takes the next connection accepted, when {@link hold} was called. */
  #holdNext: ((client: net.Socket) => void) | null = null;

  private constructor(targetPort: number) {
    this.#listener = new ProxyListener((client) => this.#accept(client));
    this.#target = targetPort;
  }

  /** Listens on a free port of 127.0.0.1 and forwards each connection to `targetPort` of 127.0.0.1. */
  static async start(targetPort: number): Promise<LateHandshakeProxy> {
    const proxy = new LateHandshakeProxy(targetPort);
    await proxy.#listener.listen();
    return proxy;
  }

  /** The proxy's port on 127.0.0.1. */
  get port(): number {
    return this.#listener.port;
  }

  /** Holds the next connection accepted (see {@link Held}); call it before that connection comes. */
  hold(): Held {
    const bytes: Buffer[] = [];
    let resolveGivenUp = (): void => undefined;
    const givenUp = new Promise<void>((resolve) => { resolveGivenUp = resolve; });
    this.#holdNext = (client) => {
      client.on('data', (chunk: Buffer) => bytes.push(chunk));
      client.on('error', () => undefined).on('close', resolveGivenUp);
    };
    const release = async (): Promise<string> => {
      await givenUp;
      const upstream = this.#connect();
      await once(upstream, 'connect');
      upstream.write(Buffer.concat(bytes));
      const [answer] = await once(upstream, 'data') as [Buffer];
      upstream.end(); // the FIN, trailing the request by the node's answer
      upstream.resume(); // what follows (a close frame) is read and dropped
      return answer.toString('latin1').split('\r\n')[0] as string;
    };
    return { givenUp, release };
  }

  #connect(): net.Socket {
    const upstream = net.connect(this.#target, '127.0.0.1');
    this.#listener.sockets.add(upstream);
    upstream.on('error', () => undefined).on('close', () => this.#listener.sockets.delete(upstream));
    return upstream;
  }

  #accept(client: net.Socket): void {
    this.#listener.sockets.add(client);
    client.on('close', () => this.#listener.sockets.delete(client));
    const held = this.#holdNext;
    this.#holdNext = null;
    if (held !== null) return held(client);
    const upstream = this.#connect();
    client.pipe(upstream).pipe(client);
    const end = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  }

  /** Stops listening and drops every connection. */
  close(): Promise<void> {
    return this.#listener.close();
  }
}
