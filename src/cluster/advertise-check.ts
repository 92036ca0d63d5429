/**
 * A start-up check of this node's advertised URL (PIXIU_ADVERTISE_URL; DESIGN.md §9):
 * other nodes read this store's records at that URL, so it must lead back here. The
 * node asks the records route there for no record, which answers only the store id,
 * and looks at which store answers.
 *
 * - Another Pixiu node answers — another store, or another cluster (a 401 with Pixiu's
 *   error body: it refused this cluster's secret): the URL is wrong. The node refuses
 *   to start — with it, other nodes would read the wrong node, and every message stored
 *   here would wait for good in their deliveries and histories.
 * - Nothing answers (refused, timed out), or something that is not a Pixiu node (a
 *   proxy's 502/503 while this node is not marked healthy yet, another service):
 *   logged at warn and started anyway. The address may be reachable from the other
 *   nodes only (a load balancer without hairpin routing), or only once this node is up.
 * - A port fetch refuses to ask (the WHATWG fetch standard's bad ports: 22, 25, 6000,
 *   6665–6669, 10080 …; https://fetch.spec.whatwg.org/#bad-port): the other nodes
 *   read records with fetch too (store-router.ts), so they refuse it as well, whatever
 *   the route. On a shared Redis the node refuses to start; alone on the embedded Redis
 *   (no other node shares it) it starts, saying so at info. Undici's "bad port" said
 *   nothing to an operator (an ops tester's finding).
 */
import { StartupError } from '../errors.js';
import type { Logger } from '../logger.js';
import { RECORDS_PATH, type RecordsAnswer } from './records-route.js';

/**
 * How long the check waits for its answer, ms: a timeout of its own, not the Redis
 * command timeout (PIXIU_REDIS_COMMAND_TIMEOUT may be as short as 10 ms, which an HTTP
 * round trip through a proxy, or a busy node's own, need not meet; an ops newcomer's
 * finding). A URL that answers nothing delays the start by this much at most.
 */
export const ADVERTISE_CHECK_TIMEOUT_MS = 5_000;

/** Options of {@link checkAdvertisedUrl}. */
export interface AdvertiseCheckOptions {
  /** The advertised base URL, e.g. `http://10.0.0.5:8080`. */
  readonly url: string;
  /** This node's store id. */
  readonly storeId: string;
  /** `Authorization` header with the cluster secret (cluster-secret.ts). */
  readonly authHeader: string;
  /** How long to wait for the answer, ms; default {@link ADVERTISE_CHECK_TIMEOUT_MS}. */
  readonly timeoutMs?: number;
  readonly logger: Logger;
  /** Aborted when the start is given up (a stop signal): no answer is waited for, nothing logged. */
  readonly signal?: AbortSignal;
  /** True when no other node can read this store: its Redis is the embedded one (a socket in its data dir). */
  readonly alone?: boolean;
}

/**
 * Checks that `url` reaches this node (see the module comment).
 * @throws StartupError when something else answers there, or when its port is one
 *   fetch refuses and the node is not {@link AdvertiseCheckOptions.alone}
 */
export async function checkAdvertisedUrl(opts: AdvertiseCheckOptions): Promise<void> {
  const advice = 'set PIXIU_ADVERTISE_URL (--advertise-url) to an address of this node that the other nodes reach';
  const timeoutMs = opts.timeoutMs ?? ADVERTISE_CHECK_TIMEOUT_MS;
  const timeout = AbortSignal.timeout(timeoutMs);
  let res: Response;
  try {
    res = await fetch(`${opts.url.replace(/\/+$/, '')}${RECORDS_PATH}`, {
      method: 'POST',
      headers: { authorization: opts.authHeader, 'content-type': 'application/json' },
      body: JSON.stringify({ ids: [] }),
      signal: opts.signal === undefined ? timeout : AbortSignal.any([timeout, opts.signal]),
    });
  } catch (err) {
    if (opts.signal?.aborted === true) return;
    if (isBadPort(err)) {
      const port = portOf(opts.url);
      if (opts.alone === true) {
        opts.logger.info({ url: opts.url, port },
          `the advertised URL's port is one fetch refuses (the WHATWG fetch standard's bad ports); no other node reads this node's messages on its embedded Redis, but on a shared Redis it would be refused at start: ${BAD_PORT_ADVICE}`);
        return;
      }
      throw badPortRefusal(opts.url);
    }
    // fetch's own words for its timeout ("The operation was aborted due to timeout")
    // do not say whose timeout, or how long: say it.
    const reason = timeout.aborted ? `no answer within ${timeoutMs} ms (the check's timeout)`
      : (err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message;
    opts.logger.warn({ url: opts.url, reason },
      `the advertised URL does not reach this node from itself; unless the other nodes reach it by another route, they cannot read this node's messages: ${advice}`);
    return;
  }
  const body = await res.json().catch(() => undefined) as (Partial<RecordsAnswer> & { error?: { code?: unknown } }) | undefined;
  if (res.ok && body?.store === opts.storeId) return;
  const found = res.ok && typeof body?.store === 'string' ? `the node of store ${body.store}, not this one (store ${opts.storeId})`
    : res.status === 401 && body?.error?.code === 'UNAUTHORIZED' ? 'a Pixiu node of another cluster (it refused this cluster\'s secret)'
      : undefined;
  if (found !== undefined) {
    throw new StartupError(`the advertised URL ${opts.url} reaches ${found}: other nodes would not read this node's messages there; ${advice}`);
  }
  opts.logger.warn({ url: opts.url, status: res.status },
    `the advertised URL answers, but not as this node (HTTP ${res.status}: a proxy not yet routing to it, or another service); unless the other nodes reach this node there once it is up, they cannot read its messages: ${advice}`);
}

/** What to do about an advertised URL whose port fetch refuses. */
const BAD_PORT_ADVICE = 'listen on another port (PIXIU_PORT, --port) or set PIXIU_ADVERTISE_URL (--advertise-url) to a URL with another port';

/**
 * A dispatcher (undici's, which Node's fetch takes as `dispatcher`) that fails every
 * request it is handed: fetch refuses a bad port before it hands the request to one.
 */
const NO_NETWORK = {
  dispatch(_opts: unknown, handler: { onError(err: Error): void }): boolean {
    queueMicrotask(() => handler.onError(new Error('not sent: a port check')));
    return true;
  },
};

/**
 * Refuses `url` when fetch refuses its port (the WHATWG bad ports), without a request
 * on the network: fetch is asked with a dispatcher that sends nothing, so it fails
 * either for the port or at the dispatcher. Run before the store's claim, when the
 * advertised URL is known then (set, or a fixed port), so a start refused for it takes
 * no block of partitions (a final verifier's finding: the check after the start took
 * one). The check after the start ({@link checkAdvertisedUrl}) covers port 0.
 * @throws StartupError as {@link checkAdvertisedUrl} does for such a port
 */
export async function refuseBadPort(url: string): Promise<void> {
  try {
    await fetch(url, { dispatcher: NO_NETWORK } as RequestInit);
  } catch (err) {
    if (isBadPort(err)) throw badPortRefusal(url);
  }
}

/** The refusal of an advertised URL whose port fetch refuses. */
function badPortRefusal(url: string): StartupError {
  return new StartupError(`the advertised URL ${url} has port ${portOf(url)}, which fetch, the HTTP client the other Pixiu nodes read this node's messages with, refuses to ask: it is on the WHATWG fetch standard's list of bad ports (22, 25, 6000, 6665-6669, 10080 and others: https://fetch.spec.whatwg.org/#bad-port); ${BAD_PORT_ADVICE}`);
}

/**
 * True when `err` is fetch refusing the URL's port (undici's network error "bad port":
 * https://fetch.spec.whatwg.org/#port-blocking). Told by fetch itself rather than by a
 * list of our own, so it is refused exactly when the other nodes' fetch (the same
 * Node's) refuses it.
 */
function isBadPort(err: unknown): boolean {
  const cause = (err as { cause?: unknown } | null)?.cause;
  return cause instanceof Error && cause.message === 'bad port';
}

/** The port of `url` as fetch asks it: its own, or its scheme's default. */
function portOf(url: string): number {
  const u = new URL(url);
  return u.port !== '' ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
}

/**
 * The URL other nodes reach a node at when PIXIU_ADVERTISE_URL is unset:
 * `http://<host>:<port>`, with a wildcard listen address (`0.0.0.0`, `::`) replaced by
 * 127.0.0.1 (right for nodes on one machine; set PIXIU_ADVERTISE_URL otherwise) and an
 * IPv6 address in brackets.
 */
export function defaultAdvertiseUrl(host: string, port: number): string {
  const wildcard = host === '' || host === '0.0.0.0' || host === '::' || host === '[::]';
  const name = wildcard ? '127.0.0.1' : host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return `http://${name}:${port}`;
}
