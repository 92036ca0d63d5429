/**
 * The sockets of one connection through a test's TCP proxy (lag-proxy.ts,
 * command-swap-proxy.ts): the client's, and the one opened to Redis for it.
 */
import net from 'node:net';

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
