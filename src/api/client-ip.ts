/**
 * The client's address as the node's refusal lines log it, `ip` (README "Addresses",
 * docs/decisions.md "Client addresses behind a proxy").
 */
import { isIP } from 'node:net';
import type { FastifyRequest } from 'fastify';

/**
 * The request's client address: fastify's `request.ip` (the TCP peer's, or with
 * PIXIU_TRUST_PROXY the first untrusted entry of `X-Forwarded-For`, read from the
 * right), unless that is no IP address; then the TCP peer's.
 *
 * Why the check: `@fastify/proxy-addr` trusts no entry that is not an address but
 * returns it unchecked, so a client whose own address is in a trusted range (say
 * `uniquelocal`, producers on the proxy's network) sending `X-Forwarded-For: anything`
 * would put any text, up to the header's limit, in the line's `ip`.
 * @returns an IPv4 or IPv6 address (`net.isIP`), or undefined for a socket already gone
 */
export function clientIp(req: Pick<FastifyRequest, 'ip' | 'raw'>): string | undefined {
  const ip = req.ip;
  return isIP(ip) !== 0 ? ip : req.raw.socket.remoteAddress;
}

/**
 * What the lines about one request's refusal (and the debug `connection open` of its
 * WebSocket) carry to tie them to it: `reqId`, fastify's `request.id`, which the
 * answer says in `X-Request-Id` (a 101 too: src/gateway/upgrade-request-id.ts) and a
 * proxy logs beside its own line (README "Addresses"); `ip`, {@link clientIp}.
 * Lines written through `req.log` have the `reqId` already; these are written with
 * the node's logger (the token verifier, the handshake refusals, the connection's).
 */
export interface ClientFields {
  /** The request's id, as its answer's `X-Request-Id` says it. */
  readonly reqId: string;
  /** {@link clientIp}: undefined for a socket already gone. */
  readonly ip: string | undefined;
}

/** A getter of `req`'s {@link ClientFields}, read only when a line is written (each read of `ip` may parse X-Forwarded-For). */
export type ClientOf = () => ClientFields;

/** The {@link ClientFields} of `req`. */
export function clientFields(req: Pick<FastifyRequest, 'id' | 'ip' | 'raw'>): ClientFields {
  return { reqId: req.id, ip: clientIp(req) };
}
