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
