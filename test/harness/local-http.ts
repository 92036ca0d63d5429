/**
 * A plain HTTP server on 127.0.0.1 for tests that need something the node fetches (a
 * JWKS, say), and a TCP server that never answers (a URL that hangs); each closed with
 * its connections at the test's end.
 */
import { once } from 'node:events';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import type { CleanupContext } from './pixiu-server.js';

/**
 * Listens with `handler` on a free port of 127.0.0.1 until `t` ends.
 * @returns `http://127.0.0.1:<port>`, no trailing slash
 */
export async function serveLocally(t: CleanupContext, handler: http.RequestListener): Promise<string> {
  const server = http.createServer(handler);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(async () => {
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/**
 * A TCP server on a free port of 127.0.0.1 that accepts connections and never answers
 * (an advertised URL that hangs), until `t` ends.
 * @returns its port, and a promise of its first connection
 */
export async function blackHole(t: CleanupContext): Promise<{ port: number; reached: Promise<unknown> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => { sockets.add(s); s.on('error', () => undefined); });
  const reached = once(server, 'connection');
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => { for (const s of sockets) s.destroy(); server.close(); });
  return { port: (server.address() as AddressInfo).port, reached };
}
