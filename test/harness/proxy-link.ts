/**
 * What every test TCP proxy in this folder shares (lag-proxy.ts, command-swap-proxy.ts,
 * stall-proxy.ts, blackhole-proxy.ts, late-handshake-proxy.ts, drop-proxy.ts): its listening side
 * ({@link ProxyListener}: a free port of 127.0.0.1, and every socket dropped on close),
 * the sockets of one connection through it ({@link openLink}): the client's, and the
 * one opened upstream; and, for the proxies that read what clients send, the RESP
 * command parser ({@link nextCommand}).
 */
import net from 'node:net';
import { once } from 'node:events';

/** The listening side of a test's TCP proxy; the proxy's own `close` calls {@link close}. */
export class ProxyListener {
  /** The sockets {@link close} destroys: each proxy adds its connections' (see {@link openLink}). */
  readonly sockets = new Set<net.Socket>();
  readonly #server: net.Server;

  /** @param accept takes each connection accepted, once {@link listen} has resolved */
  constructor(accept: (client: net.Socket) => void) {
    this.#server = net.createServer(accept);
  }

  /** Listens on a free port of 127.0.0.1; resolves once it does. */
  async listen(): Promise<void> {
    this.#server.listen(0, '127.0.0.1');
    await once(this.#server, 'listening');
  }

  /** The port it listens on (127.0.0.1). */
  get port(): number {
    return (this.#server.address() as net.AddressInfo).port;
  }

  /** `redis://127.0.0.1:<port>`: the URL a node uses to reach Redis through the proxy. */
  get redisUrl(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Destroys every socket in {@link sockets}, stops listening, and resolves once the server has closed. */
  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    this.#server.close();
    await once(this.#server, 'close').catch(() => undefined);
  }
}

/** One proxied connection (see {@link openLink}). */
export interface ProxyLink {
  /** The socket to Redis opened for the client. */
  readonly upstream: net.Socket;
  /** Closes both sockets and forgets them. Idempotent. */
  readonly end: () => void;
}

/** Connects `client` to `target` and tracks both sockets in `sockets` until the link's `end`. */
export function openLink(client: net.Socket, target: { host: string; port: number }, sockets: Set<net.Socket>): ProxyLink {
  const upstream = net.connect(target.port, target.host);
  sockets.add(client).add(upstream);
  const end = (): void => {
    client.destroy();
    upstream.destroy();
    sockets.delete(client);
    sockets.delete(upstream);
  };
  return { upstream, end };
}

/**
 * Passes Redis's replies on `link` to `client` as they come, and ends the link when
 * either socket closes or fails (the proxies that change or hold what clients send).
 */
export function relayReplies(client: net.Socket, link: ProxyLink): void {
  link.upstream.on('data', (chunk: Buffer) => {
    if (!client.destroyed) client.write(chunk);
  });
  client.on('close', link.end).on('error', link.end);
  link.upstream.on('close', link.end).on('error', link.end);
}

/** A command as a proxy reads it ({@link nextCommand}): its name, lowercased, and its arguments. */
export interface SeenCommand {
  readonly name: string;
  readonly args: readonly string[];
}

/**
 * The command at the start of `buf` (a RESP array of bulk strings): its name,
 * lowercased, its arguments after the name (latin1), and how many bytes it takes;
 * undefined while it is not all there (command-swap-proxy.ts, stall-proxy.ts, drop-proxy.ts).
 */
export function nextCommand(buf: Buffer): (SeenCommand & { readonly length: number }) | undefined {
  let at = 0;
  const line = (): string | undefined => {
    const end = buf.indexOf('\r\n', at, 'latin1');
    if (end < 0) return undefined;
    const text = buf.toString('latin1', at, end);
    at = end + 2;
    return text;
  };
  const head = line();
  if (head === undefined) return undefined;
  if (!head.startsWith('*')) throw new Error(`not a RESP array: ${JSON.stringify(head)}`);
  let name = '';
  const args: string[] = [];
  for (let i = 0; i < Number(head.slice(1)); i++) {
    const size = line();
    if (size === undefined) return undefined;
    const bytes = Number(size.slice(1));
    if (buf.length < at + bytes + 2) return undefined;
    const word = buf.toString('latin1', at, at + bytes);
    if (i === 0) name = word.toLowerCase();
    else args.push(word);
    at += bytes + 2;
  }
  return { name, args, length: at };
}
