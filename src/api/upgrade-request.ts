/**
 * Whether a request asked for a protocol upgrade, read the way Node decided it.
 */
import type { FastifyRequest } from 'fastify';

/**
 * True when Node handed `req`'s socket to the server's `upgrade` event: the request
 * carried `Connection: Upgrade` and an `Upgrade` header (any protocol, path or method:
 * a WebSocket handshake, `Upgrade: h2c`), and Node set `IncomingMessage.upgrade` on it.
 * Such a socket has left Node's HTTP machinery: nothing reads another request from it,
 * and src/gateway/upgrade-guard.ts closes it once its answer is out. Node's type of
 * `IncomingMessage` does not declare the field, hence this one reading of it.
 */
export function isUpgrade(req: FastifyRequest): boolean {
  return (req.raw as { upgrade?: boolean }).upgrade === true;
}
