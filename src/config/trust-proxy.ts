/**
 * `PIXIU_TRUST_PROXY` (docs/decisions.md "Client addresses behind a proxy"): the
 * reverse proxies whose `X-Forwarded-For` names the client. Its entries are handed to
 * fastify's `trustProxy`, which reads the header with `@fastify/proxy-addr` (the header
 * is never parsed here); each is checked first, so that a typo ends the start naming
 * the setting rather than being read as an address nobody meant (`127.1` is
 * 127.0.0.1 to proxy-addr, `0177.0.0.1` too) or failing inside fastify with a bare
 * "invalid IP address".
 *
 * Offered: addresses and CIDR ranges (`10.0.0.0/8`), and proxy-addr's names
 * `loopback`, `linklocal` and `uniquelocal`. Not offered: `true` (trust every hop) and
 * hop counts: with either, a client that reaches the node without the proxy, or puts
 * its own `X-Forwarded-For` ahead of the proxy's, chooses the address logged for it;
 * nor a range of prefix length 0 (`0.0.0.0/0`, `::/0`), which is every address.
 *
 * Entries are separated by commas; an empty one (`10.0.0.5,`, `,` alone) is skipped,
 * as in every list setting (`PIXIU_ALLOWED_ORIGINS`), and the node's `pixiu listening`
 * line names the list it read (walk36 F3).
 */
import { BlockList, isIP } from 'node:net';

/** proxy-addr's names for ranges, as it takes them. */
const NAMED_RANGES: ReadonlySet<string> = new Set(['loopback', 'linklocal', 'uniquelocal']);

/**
 * The IPv4-mapped IPv6 addresses, `::ffff:0:0/96` (RFC 4291 §2.5.5.2), matched by Node's
 * own parser: every spelling of one (`0:0:0:0:0:ffff:10.0.0.1`, `::FFFF:A00:1`, with a
 * zone) is the same address to it, where a text match sees only the one written.
 */
const IPV4_MAPPED = new BlockList();
IPV4_MAPPED.addSubnet('::ffff:0:0', 96, 'ipv6');

/** A prefix length as written in CIDR: a whole number without leading zeros. */
const PREFIX = /^[1-9]\d{0,2}$/;

/** Why an entry with a prefix length of 0 is refused: it names every address. */
const EVERY_ADDRESS = 'a prefix length of 0 is every address: trusting every address would let any client choose the address logged for it by sending X-Forwarded-For; '
  + 'name the proxy\'s address or range';

/**
 * What is wrong with one entry of `PIXIU_TRUST_PROXY`, in words that quote it.
 * @param entry one comma-separated entry, trimmed (the list kind skips empty ones)
 * @returns undefined when it is an address (IPv4 dotted quad or IPv6, as Node's
 *   `net.isIP` takes it), an address with a prefix length from 1 to 32 (IPv4) or 128
 *   (IPv6), or one of {@link NAMED_RANGES}; else the problem
 */
export function trustProxyEntryProblem(entry: string): string | undefined {
  if (NAMED_RANGES.has(entry)) return undefined;
  // `10.0.0.1 10.0.0.2` is two entries, not one malformed (walk36 F3: it was refused as "no prefix length").
  if (/[\s;]/.test(entry)) return `${JSON.stringify(entry)} is not one address or range: separate entries with commas (10.0.0.5,10.1.0.0/16), not spaces or ;`;
  if (/^(true|false|\d+)$/i.test(entry)) {
    return `${JSON.stringify(entry)} is no proxy address: trusting every hop or a hop count would let any client choose the address logged for it by sending X-Forwarded-For; `
      + 'name the proxy\'s address or range (unset or empty: trust no proxy)';
  }
  const slash = entry.indexOf('/');
  const address = slash === -1 ? entry : entry.slice(0, slash);
  const kind = isIP(address);
  if (kind === 0) return `${JSON.stringify(entry)} is not an IPv4 or IPv6 address or CIDR range, nor loopback, linklocal or uniquelocal`;
  // proxy-addr reads an IPv4-mapped entry as its IPv4 address and its prefix
  // unpredictably; the IPv4 entry already matches the mapped form of the address.
  if (kind === 6 && IPV4_MAPPED.check(address, 'ipv6')) {
    return `${JSON.stringify(entry)} is an IPv4-mapped address: write the IPv4 address (it also matches its ::ffff: form)`;
  }
  if (slash === -1) return undefined;
  const prefix = entry.slice(slash + 1);
  const max = kind === 4 ? 32 : 128;
  if (prefix === '0') return `${JSON.stringify(entry)}: ${EVERY_ADDRESS}`;
  if (!PREFIX.test(prefix) || Number(prefix) > max) {
    return `${JSON.stringify(entry)} has no prefix length from 1 to ${max} after its /`;
  }
  return undefined;
}
