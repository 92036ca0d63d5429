/**
 * A plain HTTP server on 127.0.0.1 for tests that need something the node fetches (a
 * JWKS, say), closed with its connections at the test's end.
 */
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
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
