/**
 * The `X-Request-Id` of an accepted WebSocket handshake's `101 Switching Protocols`
 * (README "Addresses", walk36 F1): every other answer says its request's id in an
 * `onSend` hook (src/api/request-ids.ts), but a 101 is written by `ws` straight to the
 * socket, past fastify's reply, so none said it and a proxy's line of an upgrade (logged
 * when the socket ends) could not be tied to the node's. `ws` lets the handshake's
 * headers be added to through its server's `headers` event (ws's
 * WebSocketServer#completeUpgrade, "allow external modification of handshake
 * headers"), which gives the raw request, not fastify's: the id is kept for it from
 * the scope's `onRequest` until the 101 is written.
 */
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type {} from '@fastify/websocket';

/** The header's name as written in the 101 (`ws` writes its own in this case). */
const HEADER = 'X-Request-Id';

/**
 * Makes every 101 of `scope`'s WebSocket routes say its request's id. Call in the scope
 * @fastify/websocket was registered in (its `websocketServer`), before the routes.
 * The id is one request-ids.ts took or made: visible ASCII only, so it cannot break
 * the header block.
 */
export function answerUpgradeIds(scope: FastifyInstance): void {
  // Weak: a request refused, or a client gone before its upgrade, leaves nothing behind.
  const ids = new WeakMap<IncomingMessage, string>();
  scope.addHook('onRequest', (req, _reply, done) => {
    ids.set(req.raw, req.id);
    done();
  });
  scope.websocketServer.on('headers', (headers: string[], raw: IncomingMessage) => {
    const id = ids.get(raw);
    if (id !== undefined) headers.push(`${HEADER}: ${id}`);
  });
}
